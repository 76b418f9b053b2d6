package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubelet-labs/internal/labenv"
)

// Scenario is one fault: how to break it, how to tell it is fixed, how to
// put it back. Each lives in a file of its own and is listed in scenarios.
type Scenario struct {
	Name    string // as typed: make break SCENARIO=Name
	Lab     string // the lab it belongs to, e.g. "04-csr"
	Summary string // one line for the list: the symptom, not the cause
	// NeedsNode: the break needs a running node (lab 01 or 18) and records it.
	NeedsNode bool
	// Break makes the fault and says, in env.Out, what it did — the
	// symptom's side, never the answer. It may fill in rec.
	Break func(ctx context.Context, env *Env, rec *Record) error
	// LookFirst is where to start looking, printed after a break.
	LookFirst func(rec Record) []string
	// Check looks at the cluster as it is now.
	Check func(ctx context.Context, env *Env, rec Record) (Result, error)
	// Undo puts back what Break changed and removes what it made; it
	// must work after a partial break and after a learner's own fix.
	Undo func(ctx context.Context, env *Env, rec Record) error
}

// Result is what check saw: fixed or not, and each thing it looked at.
type Result struct {
	Fixed bool
	Seen  []string
}

func (r *Result) see(format string, args ...any) {
	r.Seen = append(r.Seen, fmt.Sprintf(format, args...))
}

// scenarios, in the course's order.
var scenarios = []*Scenario{
	leaseStopped,
	csrPending,
	imagePull,
	shortGrace,
	stuckTerminating,
	crashLoop,
}

func lookup(name string) (*Scenario, bool) {
	for _, sc := range scenarios {
		if sc.Name == name {
			return sc, true
		}
	}
	return nil, false
}

func names() string {
	var n []string
	for _, sc := range scenarios {
		n = append(n, sc.Name)
	}
	return strings.Join(n, ", ")
}

// Env is what a scenario works with: the learner's cluster as admin, the
// state folder's faults/ folder, and the clock (tests set Now, Wait and
// Poll).
type Env struct {
	Admin  kubernetes.Interface
	Config *rest.Config
	Out    *labenv.Printer
	Dir    string
	Now    func() time.Time
	// Wait bounds each wait for a symptom or a pod's end; Poll is how
	// often a wait looks.
	Wait, Poll time.Duration
}

// Record is what a break leaves for check and undo, in faults/NAME.json.
type Record struct {
	Node      string `json:"node,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	// Token is the bootstrap token ID a break made (csr-pending).
	Token string `json:"token,omitempty"`
	// File is a manifest the break wrote for the learner to edit.
	File string `json:"file,omitempty"`
	// Removed are the ClusterRoleBindings a break deleted, for undo.
	Removed []rbacv1.ClusterRoleBinding `json:"removed,omitempty"`
	// UID is the broken pod's UID: a pod of the same name made later is
	// the learner's.
	UID string `json:"uid,omitempty"`
}

// faultLabel marks everything a break makes: undo finds it by this.
const faultLabel = "kubelet-labs.dev/fault"

func (e *Env) recordPath(name string) string { return filepath.Join(e.Dir, name+".json") }

// errNotBroken: check before break.
var errNotBroken = errors.New("not broken")

func (e *Env) load(name string) (Record, error) {
	var rec Record
	b, err := os.ReadFile(e.recordPath(name))
	if errors.Is(err, os.ErrNotExist) {
		return rec, fmt.Errorf("%s is not broken here (no %s): break it first with `go run ./internal/faults break %s` (make break SCENARIO=%s): %w", name, e.recordPath(name), name, name, errNotBroken)
	}
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("%s: %w (remove it, or run `go run ./internal/faults undo %s`)", e.recordPath(name), err, name)
	}
	return rec, nil
}

func (e *Env) save(name string, rec Record) error {
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(e.recordPath(name), append(b, '\n'), 0o600)
}

func (e *Env) forget(name string) error {
	if err := os.Remove(e.recordPath(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// waitFor calls f every Poll until it says done, f fails, or Wait passes;
// what says what is awaited, for the timeout's message.
func (e *Env) waitFor(ctx context.Context, what string, f func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, e.Wait)
	defer cancel()
	t := time.NewTicker(e.Poll)
	defer t.Stop()
	for {
		done, err := f(ctx)
		if err != nil && ctx.Err() == nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waited %s for %s: %w", e.Wait, what, ctx.Err())
		case <-t.C:
		}
	}
}
