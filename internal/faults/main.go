package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/state"
	"kubelet-labs/mycore/bootstrap"
)

func main() { os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr)) }

// usage is the one line every bad invocation ends with.
const usage = "usage: go run ./internal/faults [break|check|undo NAME] [flags]   (make break [SCENARIO=NAME], make check SCENARIO=NAME)"

// options are the flags every verb takes; empty means "as the break
// recorded it", or for a break, found on the cluster.
type options struct {
	kubeconfig string
	node       string
	namespace  string
}

// execute runs one invocation and returns its exit code: 0 listed, broken,
// fixed or undone; 1 when something failed or check found it not fixed
// yet; 2 for a bad verb, name or flag. The verb and name come before the
// flags (labenv.Exec takes flags only).
func execute(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "list" && len(args) == 1 {
		list(stdout)
		return 0
	}
	verb := args[0]
	if verb == "-h" || verb == "--help" || verb == "help" {
		fmt.Fprintln(stdout, usage)
		list(stdout)
		return 0
	}
	if verb != "break" && verb != "check" && verb != "undo" {
		fmt.Fprintf(stderr, "error: unknown command %q: want break, check or undo\n%s\n", verb, usage)
		return 2
	}
	if len(args) < 2 || strings.HasPrefix(args[1], "-") {
		fmt.Fprintf(stderr, "error: %s needs a scenario's name (one of: %s)\n%s\n", verb, names(), usage)
		return 2
	}
	sc, ok := lookup(args[1])
	if !ok {
		fmt.Fprintf(stderr, "error: no scenario %q (scenarios: %s)\n", args[1], names())
		return 2
	}
	var o options
	return labenv.Exec(labenv.Lab{
		Name:    "faults",
		Command: "go run ./internal/faults " + verb + " " + sc.Name,
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.kubeconfig, "kubeconfig", "", labenv.KubeconfigUsage)
			fs.StringVar(&o.node, "node", "", "the node to break (default: the one running node; check and undo: the one the break used)")
			fs.StringVar(&o.namespace, "namespace", "", "the namespace of the scenario's pods (default: default; check and undo: the one the break used)")
		},
		Check: func() error {
			if o.node == "" {
				return nil
			}
			if err := bootstrap.ValidateNodeName(o.node); err != nil {
				return fmt.Errorf("--node %w", err)
			}
			return nil
		},
		Run: func(ctx context.Context, out *labenv.Printer) error {
			env, err := newEnv(ctx, o, sc, out)
			if err != nil {
				return err
			}
			switch verb {
			case "break":
				return doBreak(ctx, env, sc, o)
			case "check":
				return doCheck(ctx, env, sc)
			default:
				return doUndo(ctx, env, sc)
			}
		},
	}, args[2:], stdout, stderr)
}

// list prints every scenario: name, lab, one line.
func list(w io.Writer) {
	fmt.Fprintln(w, "fault scenarios (go run ./internal/faults break NAME; make break SCENARIO=NAME):")
	for _, sc := range scenarios {
		fmt.Fprintf(w, "  %-18s lab %-20s %s\n", sc.Name, sc.Lab, sc.Summary)
	}
	fmt.Fprintln(w, "Each one's page: docs/faults/NAME.md. Then: make check SCENARIO=NAME tells when it is fixed.")
}

// newEnv finds the cluster and the state folder's faults/ folder.
func newEnv(ctx context.Context, o options, sc *Scenario, out *labenv.Printer) (*Env, error) {
	cfg, err := labenv.RESTConfig(ctx, o.kubeconfig)
	if err != nil {
		return nil, err
	}
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dir, err := state.Ensure("faults")
	if err != nil {
		return nil, err
	}
	return &Env{Admin: admin, Config: cfg, Out: out, Dir: dir, Now: time.Now, Wait: 2 * time.Minute, Poll: 250 * time.Millisecond}, nil
}

func doBreak(ctx context.Context, env *Env, sc *Scenario, o options) error {
	if rec, err := env.load(sc.Name); err == nil {
		where := ""
		if rec.Node != "" {
			where = fmt.Sprintf(" (on node %s, namespace %s)", rec.Node, rec.Namespace)
		}
		return fmt.Errorf("%s is already broken%s; check it with `go run ./internal/faults check %s`, or put it back with `go run ./internal/faults undo %s`", sc.Name, where, sc.Name, sc.Name)
	}
	rec := Record{Namespace: o.namespace}
	if rec.Namespace == "" {
		rec.Namespace = "default"
	}
	if sc.NeedsNode {
		node, err := runningNode(ctx, env, o.node)
		if err != nil {
			return err
		}
		rec.Node = node
	}
	env.Out.Printf("breaking %s (lab %s) …", sc.Name, sc.Lab)
	if err := sc.Break(ctx, env, &rec); err != nil {
		// Half a break is worse than none: take back what was made.
		if uerr := sc.Undo(ctx, env, rec); uerr != nil {
			env.Out.Printf("(and putting back what was made failed too: %v; run `go run ./internal/faults undo %s`)", uerr, sc.Name)
		}
		return fmt.Errorf("break %s: %w", sc.Name, err)
	}
	if err := env.save(sc.Name, rec); err != nil {
		return err
	}
	env.Out.Printf("broken. Where to start looking:")
	for _, l := range sc.LookFirst(rec) {
		env.Out.Printf("  %s", l)
	}
	env.Out.Printf("The page: docs/faults/%s.md. When you think it is fixed: make check SCENARIO=%s", sc.Name, sc.Name)
	return nil
}

func doCheck(ctx context.Context, env *Env, sc *Scenario) error {
	rec, err := env.load(sc.Name)
	if err != nil {
		return err
	}
	env.Out.Printf("%s (lab %s) — what check sees:", sc.Name, sc.Lab)
	res, err := sc.Check(ctx, env, rec)
	if err != nil {
		return err
	}
	for _, l := range res.Seen {
		env.Out.Printf("  %s", l)
	}
	if !res.Fixed {
		return labenv.ExitCode{Code: 1, Message: fmt.Sprintf("not fixed yet. The page: docs/faults/%s.md", sc.Name)}
	}
	env.Out.Printf("fixed. `go run ./internal/faults undo %s` clears what the break left (its record, and objects it labelled).", sc.Name)
	return nil
}

func doUndo(ctx context.Context, env *Env, sc *Scenario) error {
	rec, err := env.load(sc.Name)
	if err != nil {
		// Undo also after a lost record: everything a break makes carries
		// the fault's label, and the scenarios find it by that.
		rec = Record{Namespace: "default"}
	}
	if err := sc.Undo(ctx, env, rec); err != nil {
		return fmt.Errorf("undo %s: %w", sc.Name, err)
	}
	if err := env.forget(sc.Name); err != nil {
		return err
	}
	env.Out.Printf("%s put back.", sc.Name)
	return nil
}
