package labenv

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Lab is one lab program: its folder name, its flags and its body. Every
// lab's main() is one call to Main with one of these, so starting, failing
// and exiting are the same in all nineteen:
//
//	func main() {
//		var o options
//		labenv.Main(labenv.Lab{
//			Name:  "07-pleg",
//			Flags: func(fs *flag.FlagSet) { fs.DurationVar(&o.relistPeriod, "relist-period", time.Second, "…") },
//			Run:   func(ctx context.Context, out *labenv.Printer) error { return run(ctx, o, out) },
//		})
//	}
type Lab struct {
	// Name is the lab's folder, e.g. "07-pleg": the usage line and the
	// flag set are named after it.
	Name string
	// Command is how the usage line says to run the program; empty means
	// "go run ./labs/<Name>". The course's tools that share this skeleton
	// (the self-check) name their own.
	Command string
	// Flags registers the lab's flags on its own FlagSet (not
	// flag.CommandLine: the kubelet packages some labs import register
	// cAdvisor's and klog's flags there, and -h should list only the lab's).
	Flags func(fs *flag.FlagSet)
	// Check, if set, validates the flags once parsed, before anything
	// starts: its error is a usage error (exit 2), like an unknown flag.
	Check func() error
	// Run is the lab. ctx ends at the first Ctrl-C, SIGTERM or SIGHUP (a second
	// one kills the program at once). Its error is printed as one line and
	// exits 1; an ExitCode error exits with its code.
	Run func(ctx context.Context, out *Printer) error
}

// ExitCode is an error a lab returns to exit with a code of its own (lab
// 11 exits like `crictl info` would). Message, if set, is printed first.
type ExitCode struct {
	Code    int
	Message string
}

func (e ExitCode) Error() string {
	if e.Message != "" {
		return e.Message
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

// Main runs lab with the program's arguments and exits: 0 when Run
// returns nil (also after Ctrl-C), 1 with "error: …" on stderr when it
// fails, 2 on a bad flag or argument.
func Main(lab Lab) {
	os.Exit(Exec(lab, os.Args[1:], os.Stdout, os.Stderr))
}

// Exec is Main without the exit, for tests: it returns the exit code.
func Exec(lab Lab, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(lab.Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	command := lab.Command
	if command == "" {
		command = "go run ./labs/" + lab.Name
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s [flags]\n", command)
		fs.PrintDefaults()
	}
	if lab.Flags != nil {
		lab.Flags(fs)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2 // the flag package printed what was wrong, and the usage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "error: unexpected argument %q (flags only; -h lists them)\n", strings.Join(fs.Args(), " "))
		return 2
	}
	if lab.Check != nil {
		if err := lab.Check(); err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 2
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signals := make(chan os.Signal, 1)
	stops := []os.Signal{os.Interrupt, syscall.SIGTERM}
	// A closed terminal sends SIGHUP: clean up as for Ctrl-C (lab 00 would
	// otherwise leave its state folder locked). Under nohup it is ignored,
	// and stays so: the learner asked for the lab to outlive the terminal.
	if !signal.Ignored(syscall.SIGHUP) {
		stops = append(stops, syscall.SIGHUP)
	}
	signal.Notify(signals, stops...)
	go func() {
		if _, ok := <-signals; !ok {
			return
		}
		// The first signal asks the lab to clean up; from now on the
		// default action applies, so a second Ctrl-C ends a stuck lab.
		signal.Stop(signals)
		cancel()
	}()
	defer func() { signal.Stop(signals); close(signals) }()

	err := lab.Run(ctx, NewPrinter(stdout))
	var code ExitCode
	switch {
	case err == nil:
		return 0
	case errors.As(err, &code):
		if code.Message != "" {
			fmt.Fprintln(stderr, code.Message)
		}
		return code.Code
	default:
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
}
