// Command 06-cri-mock serves the mock CRI runtime (mylib/fakecri) on a
// unix socket so you can drive the CRI by hand with crictl and watch
// every call arrive — the same calls the kubelet makes for a pod.
//
//	go run ./labs/06-cri-mock            # serves .labs/mockcri.sock
//	go run ./labs/06-cri-mock -socket "${LABS_STATE_DIR:-.labs}/06-cri-mock/cri.sock" -events
//
// It stays in the foreground; Ctrl-C (or SIGTERM) stops it and removes the
// sockets. It exits non-zero with a clear message if the socket is already
// served by a live process or held by another starter, or if its folder is
// not writable by us — or writable by others (/tmp: another user could
// create the socket first), unless sticky and ours.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labrecord"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/state"
	"kubelet-labs/labs/06-cri-mock/crictlfiles"
	"kubelet-labs/mylib/fakecri"
)

type options struct {
	socket                  string
	events, quiet, allCalls bool
}

func main() {
	var o options
	labenv.Main(labenv.Lab{
		Name: "06-cri-mock",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.socket, "socket", "", "CRI socket path (default: <state>/mockcri.sock; state is .labs/ or $LABS_STATE_DIR)")
			fs.BoolVar(&o.events, "events", false, "also print container events (what GetContainerEvents streams to the evented PLEG)")
			fs.BoolVar(&o.quiet, "quiet", false, "do not print CRI calls")
			fs.BoolVar(&o.allCalls, "all-calls", false, "also print Version and ImageFsInfo, which crictl sends on every connection")
		},
		Run: func(ctx context.Context, out *labenv.Printer) error { return run(ctx, o, out, nil) },
	})
}

// run serves until ctx ends; ready (tests) is called once it serves.
func run(ctx context.Context, o options, out *labenv.Printer, ready func(*fakecri.Server)) error {
	stateDir, err := state.Ensure()
	if err != nil {
		return err
	}
	if o.socket == "" {
		o.socket = filepath.Join(stateDir, "mockcri.sock")
	}
	labDir := filepath.Join(stateDir, "06-cri-mock")

	// Every CRI call, as it arrives: the mock tells an observer about each
	// one after answering it.
	opts := []fakecri.Option{
		// The course's image names, which our containerd has too (lab 11):
		// the mock "has" both from the start, so the same requests run on
		// either, and lab 07 can watch this mock.
		fakecri.WithPauseImage(labruntime.PauseImage),
		fakecri.WithImages(labruntime.BusyboxImage),
	}
	// They go to calls.log in the lab's folder too, printed or not (-quiet):
	// the walk-through ends with crictl rm and rmp, which leave nothing in
	// the runtime, so make check LAB=06 reads the calls (internal/labrecord).
	if err := os.MkdirAll(labDir, 0o755); err != nil {
		return err
	}
	record, err := labrecord.Create(filepath.Join(labDir, "calls.log"))
	if err != nil {
		return err
	}
	defer record.Close()
	opts = append(opts, fakecri.WithCallObserver(func(c fakecri.Call) {
		if !o.allCalls && (c.Method == "Version" || c.Method == "ImageFsInfo") {
			return
		}
		line := callLine(time.Now(), c)
		record.Line("%s", line)
		if !o.quiet {
			out.Printf("%s", line)
		}
	}))

	srv, err := fakecri.Start(o.socket, opts...)
	if err != nil {
		return err
	}
	defer srv.Stop()
	if err := crictlfiles.Write(labDir, srv.Endpoint(), labruntime.BusyboxImage); err != nil {
		return fmt.Errorf("writing example configs: %w", err)
	}

	if o.events {
		ch, cancel := srv.Runtime().SubscribeEvents()
		done := make(chan struct{})
		defer func() { cancel(); <-done }()
		go func() {
			defer close(done)
			for ev := range ch {
				out.Printf("%s  event %-24s %.13s", time.Now().Format("15:04:05.000"), ev.ContainerEventType, ev.ContainerId)
			}
		}()
	}

	printGuide(out, srv, stateDir, labDir)
	if ready != nil {
		ready(srv)
	}
	<-ctx.Done()
	out.Printf("\nstopping: killing mock containers, removing %s", srv.SocketPath())
	return nil
}

func printGuide(out *labenv.Printer, srv *fakecri.Server, stateDir, labDir string) {
	crictl := filepath.Join(stateDir, "bin", "crictl")
	rel := func(p string) string {
		if wd, err := os.Getwd(); err == nil {
			if r, err := filepath.Rel(wd, p); err == nil && !startsWithDotDot(r) {
				return r
			}
		}
		return p
	}
	out.Printf("mock CRI runtime serving CRI v1 on %s", srv.Endpoint())
	out.Printf("control API (HTTP on a unix socket): %s", rel(srv.ControlSocketPath()))
	if _, err := os.Stat(crictl); errors.Is(err, os.ErrNotExist) {
		out.Printf("crictl is not built yet: run scripts/build-crictl.sh")
	}
	fmt.Fprintf(out, `
In another terminal, from the repository root:

  D=%s
  C="%s --config $D/crictl.yaml"       # crictl.yaml points crictl at %s
  $C version
  $C images                             # the pause and busybox images our containerd has too
  POD=$($C runp $D/pod.json)
  CTR=$($C create $POD $D/container.json $D/pod.json)
  $C start $CTR && $C ps
  $C exec -s $CTR sh -c 'echo hi from $HOSTNAME'
  $C exec $CTR cat /etc/resolv.conf
  $C logs $CTR
  STUB=$($C create $POD $D/ignore-sigterm.json $D/pod.json) && $C start $STUB
  time $C stop --timeout 3 $STUB        # ignores SIGTERM: waits 3 s, then SIGKILL
  $C inspect -o go-template --template '{{.status.exitCode}} {{.status.reason}}' $STUB   # 137 Error
  $C stop --timeout 10 $CTR             # dies on SIGTERM at once: 143
  $C rm $CTR $STUB && $C stopp $POD && $C rmp $POD

CRI calls appear below as they arrive (-all-calls adds the Version and
ImageFsInfo calls crictl makes on every connection). Ctrl-C stops the runtime.

`, rel(labDir), rel(crictl), srv.Endpoint())
}

func startsWithDotDot(p string) bool { return len(p) >= 2 && p[:2] == ".." }

// callLine is how a call is printed and recorded: time, method, how long
// the mock took to answer, ok or the error.
func callLine(at time.Time, c fakecri.Call) string {
	result := "ok"
	if c.Err != nil {
		result = "error: " + c.Err.Error()
	}
	return fmt.Sprintf("%s  %-22s %8s  %s", at.Format("15:04:05.000"), c.Method, c.Duration.Round(time.Microsecond), result)
}
