package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"kubelet-labs/internal/state"
)

// workCopy is where a learner's stage lives: a folder of the state folder
// (the checkout may be read-only, as in the VM).
type workCopy struct {
	Dir  string // ${LABS_STATE_DIR:-.labs}/stages/NAME
	File string // Dir/<the stage file's base name>: the learner's code
}

func workCopyOf(s Stage) (workCopy, error) {
	dir, err := state.Path("stages", s.Name)
	if err != nil {
		return workCopy{}, err
	}
	return workCopy{Dir: dir, File: filepath.Join(dir, filepath.Base(s.File))}, nil
}

// open reports whether the learner has started the stage.
func (w workCopy) open() bool {
	_, err := os.Stat(w.File)
	return err == nil
}

// passed reports whether the last grade passed (a file the grade leaves).
func (w workCopy) passed() bool {
	_, err := os.Stat(filepath.Join(w.Dir, "passed"))
	return err == nil
}

func (w workCopy) setPassed(ok bool) error {
	p := filepath.Join(w.Dir, "passed")
	if ok {
		return os.WriteFile(p, nil, 0o600)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// attempts counts the failed grades since the stage was opened: each one
// shows one hint more.
func (w workCopy) attempts() int {
	b, err := os.ReadFile(filepath.Join(w.Dir, "attempts"))
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

func (w workCopy) setAttempts(n int) error {
	return os.WriteFile(filepath.Join(w.Dir, "attempts"), []byte(strconv.Itoa(n)+"\n"), 0o600)
}

// start writes the stub as the learner's file. An open stage is left as
// it is unless reset, which keeps the old file as FILE.orig.
func start(ctx context.Context, root string, s Stage, reset bool) (workCopy, bool, error) {
	w, err := workCopyOf(s)
	if err != nil {
		return w, false, err
	}
	if w.open() && !reset {
		return w, false, nil
	}
	if _, err := state.Ensure("stages", s.Name); err != nil {
		return w, false, err
	}
	src, err := os.ReadFile(filepath.Join(root, s.File))
	if err != nil {
		return w, false, err
	}
	stub, err := makeStub(s, src, listPackageNames(ctx, root))
	if err != nil {
		return w, false, fmt.Errorf("stage %s: making the stub: %w", s.Name, err)
	}
	if w.open() {
		if err := os.Rename(w.File, w.File+".orig"); err != nil {
			return w, false, err
		}
	}
	if err := os.WriteFile(w.File, stub, 0o600); err != nil {
		return w, false, err
	}
	// the overlay is there from the start: the learner can run the lab on
	// their file before it passes (the grade writes the same one)
	if _, err := writeOverlay(root, w.Dir, s, w.File); err != nil {
		return w, false, err
	}
	if err := w.setAttempts(0); err != nil {
		return w, false, err
	}
	return w, true, w.setPassed(false)
}
