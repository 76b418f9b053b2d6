package logrotate

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The rotated files' names (:42-50). The timestamp has one-second
// resolution: two rotations of one log within a second would get the same
// name (rotateContainer waits for the next round instead).
const (
	timestampFormat = "20060102-150405"
	gzSuffix        = ".gz"
	tmpSuffix       = ".tmp"
)

// rotateLog is rotateLog (:272-305): tidy the rotated files, then rotate
// the live one.
func (r *Rotator) rotateLog(ctx context.Context, id string, rot *Rotation) error {
	logs, err := filepath.Glob(rot.Log + ".*")
	if err != nil {
		return err
	}
	logs, err = cleanupUnused(logs)
	if err != nil {
		return err
	}
	if logs, rot.Removed, err = r.removeExcess(logs); err != nil {
		return err
	}
	for _, l := range logs {
		if !strings.HasSuffix(l, gzSuffix) {
			if err := compress(l); err != nil {
				return err
			}
		}
	}
	return r.rotateLatest(ctx, id, rot)
}

// cleanupUnused is cleanupUnusedLogs with filterUnusedLogs and isInUse
// (:309-349): a .tmp file, or a file whose .gz exists, is what a
// compression that did not finish left behind.
func cleanupUnused(logs []string) ([]string, error) {
	var inUse []string
	for _, l := range logs {
		if strings.HasSuffix(l, tmpSuffix) || (!strings.HasSuffix(l, gzSuffix) && slices.Contains(logs, l+gzSuffix)) {
			if err := os.Remove(l); err != nil {
				return nil, fmt.Errorf("remove unused log: %w", err)
			}
			continue
		}
		inUse = append(inUse, l)
	}
	return inUse, nil
}

// removeExcess is removeExcessLogs (:352-371): the live file and the one
// about to be rotated count too, so MaxFiles-2 older ones may stay. The
// oldest go first (the timestamp sorts by name), so a reader of a newer
// one is not cut off.
func (r *Rotator) removeExcess(logs []string) (kept, removed []string, err error) {
	slices.Sort(logs)
	n := max(len(logs)-(r.o.MaxFiles-2), 0)
	for _, l := range logs[:n] {
		if err := os.Remove(l); err != nil {
			return nil, removed, fmt.Errorf("remove old log: %w", err)
		}
		removed = append(removed, l)
	}
	return logs[n:], removed, nil
}

// compress is compressLog (:374-412): gzip into log.tmp, rename that to
// log.gz, then remove log. A crash in between leaves what cleanupUnused
// removes next time.
func compress(log string) error {
	info, err := os.Stat(log)
	if err != nil {
		return err
	}
	in, err := os.Open(log)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := log + tmpSuffix
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, info.Mode())
	if err != nil {
		return err
	}
	defer os.Remove(tmp) // gone after the rename; left only on failure
	defer out.Close()
	w := gzip.NewWriter(out)
	if _, err := io.Copy(w, in); err != nil {
		return fmt.Errorf("compress %s: %w", log, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("compress %s: %w", log, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("compress %s: %w", log, err)
	}
	if err := os.Rename(tmp, log+gzSuffix); err != nil {
		return err
	}
	return os.Remove(log)
}

// rotateLatest is rotateLatestLog (:416-436): rename the live file to
// rot.Rotated (its name with the clock's timestamp, :418-419), then
// ReopenContainerLog makes the runtime start a new one. If the runtime
// refuses (the container just exited), the rename is undone so the next
// round can try again.
func (r *Rotator) rotateLatest(ctx context.Context, id string, rot *Rotation) error {
	if err := os.Rename(rot.Log, rot.Rotated); err != nil {
		return err
	}
	if err := r.rt.ReopenContainerLog(ctx, id); err != nil {
		if rerr := os.Rename(rot.Rotated, rot.Log); rerr != nil {
			return fmt.Errorf("ReopenContainerLog: %w; and renaming %s back failed (its next lines are lost): %v", err, rot.Rotated, rerr)
		}
		return fmt.Errorf("ReopenContainerLog: %w", err)
	}
	return nil
}
