package labenv

import (
	"flag"
	"os"

	"k8s.io/klog/v2"
)

// KlogToFile sends klog — which the upstream pieces a lab imports (the
// PLEG, the stream proxies, client-go) write to — into path until restore
// is called: those lines are for debugging, and would break up the lab's
// own output. The file is 0600: it may name pods and users.
func KlogToFile(path string) (restore func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	// One file for every severity: without one_output klog writes an
	// error line to the error, warning and info outputs — three times into
	// the same file.
	_ = fs.Set("one_output", "true")
	klog.SetOutput(f)
	return func() {
		klog.Flush()
		_ = fs.Set("one_output", "false")
		_ = fs.Set("logtostderr", "true")
		klog.SetOutput(os.Stderr)
		f.Close()
	}, nil
}
