// Command 06-cri-mock serves the mock CRI runtime (mylib/fakecri) on a
// unix socket so you can drive the CRI by hand with crictl and watch
// every call arrive — the same calls the kubelet makes for a pod.
//
//	go run ./labs/06-cri-mock            # serves .labs/mockcri.sock
//	go run ./labs/06-cri-mock -socket /tmp/cri.sock -events
//
// It stays in the foreground; Ctrl-C (or SIGTERM) stops it and removes the
// sockets. It exits non-zero with a clear message if the socket is already
// served by a live process or its folder is not writable.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"kubelet-labs/internal/state"
	"kubelet-labs/mylib/fakecri"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout)
	if errors.Is(err, flag.ErrHelp) {
		return // -h: the usage is printed, nothing failed
	}
	if err != nil {
		// The same one line and exit code as labenv.Fatal, without importing
		// labenv: it brings in client-go, which this lab (no cluster) does
		// not otherwise need (348 packages to build instead of 659).
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends. Output goes to out; it is safe to call from
// a test.
func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("06-cri-mock", flag.ContinueOnError)
	fs.SetOutput(out)
	socket := fs.String("socket", "", "CRI socket path (default: <state>/mockcri.sock; state is .labs/ or $LABS_STATE_DIR)")
	events := fs.Bool("events", false, "also print container events (what GetContainerEvents streams to the evented PLEG)")
	quiet := fs.Bool("quiet", false, "do not print CRI calls")
	allCalls := fs.Bool("all-calls", false, "also print Version and ImageFsInfo, which crictl sends on every connection")
	if err := fs.Parse(args); err != nil {
		return err
	}

	stateDir, err := state.Ensure()
	if err != nil {
		return err
	}
	if *socket == "" {
		*socket = filepath.Join(stateDir, "mockcri.sock")
	}
	labDir := filepath.Join(stateDir, "06-cri-mock")

	var mu sync.Mutex // calls arrive concurrently; keep lines whole
	printf := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format, a...)
	}
	var opts []fakecri.Option
	if !*quiet {
		opts = append(opts, fakecri.WithCallObserver(func(c fakecri.Call) {
			if !*allCalls && (c.Method == "Version" || c.Method == "ImageFsInfo") {
				return
			}
			result := "ok"
			if c.Err != nil {
				result = "error: " + c.Err.Error()
			}
			printf("%s  %-22s %8s  %s\n", time.Now().Format("15:04:05.000"), c.Method, c.Duration.Round(time.Microsecond), result)
		}))
	}

	srv, err := fakecri.Start(*socket, opts...)
	if err != nil {
		return err
	}
	defer srv.Stop()
	if err := writeExamples(labDir, srv.Endpoint()); err != nil {
		return fmt.Errorf("writing example configs: %w", err)
	}

	if *events {
		ch, cancel := srv.Runtime().SubscribeEvents()
		defer cancel()
		go func() {
			for ev := range ch {
				printf("%s  event %-24s %.13s\n", time.Now().Format("15:04:05.000"), ev.ContainerEventType, ev.ContainerId)
			}
		}()
	}

	printGuide(out, srv, stateDir, labDir)
	<-ctx.Done()
	printf("\nstopping: killing mock containers, removing %s\n", srv.SocketPath())
	return nil
}

func printGuide(out io.Writer, srv *fakecri.Server, stateDir, labDir string) {
	crictl := filepath.Join(stateDir, "bin", "crictl")
	rel := func(p string) string {
		if wd, err := os.Getwd(); err == nil {
			if r, err := filepath.Rel(wd, p); err == nil && !startsWithDotDot(r) {
				return r
			}
		}
		return p
	}
	fmt.Fprintf(out, "mock CRI runtime serving CRI v1 on %s\n", srv.Endpoint())
	fmt.Fprintf(out, "control API (HTTP on a unix socket): %s\n", rel(srv.ControlSocketPath()))
	if _, err := os.Stat(crictl); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(out, "crictl is not built yet: run scripts/build-crictl.sh\n")
	}
	fmt.Fprintf(out, `
In another terminal, from the repository root:

  export CRI_CONFIG_FILE=%s/crictl.yaml   # points crictl at %s
  C=%s D=%s
  $C version
  $C pull busybox
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

`, rel(labDir), srv.Endpoint(), rel(crictl), rel(labDir))
}

func startsWithDotDot(p string) bool { return len(p) >= 2 && p[:2] == ".." }
