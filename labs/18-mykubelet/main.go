// Lab 18 is the capstone: our own kubelet, every piece built in labs
// 03-17, run as one program — one node on a real runtime, or many nodes in
// one process.
//
//	sudo go run ./labs/18-mykubelet                     # node mykubelet on containerd
//	go run ./labs/18-mykubelet --runtime mock           # the same on the mock CRI
//	go run ./labs/18-mykubelet --nodes 100              # fleet mode: 100 nodes on the mock runtime
//
// The single node lives in node.go, fleet mode in fleet.go, the benchmark
// against KWOK in bench/.
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"kubelet-labs/internal/labenv"
)

func main() {
	// Our own flag set: package kubelet (imported for its types) registers
	// cAdvisor's flags on flag.CommandLine; -h should list only ours.
	fs := flag.NewFlagSet("18-mykubelet", flag.ExitOnError)
	var fo fleetOptions
	var no nodeOptions
	fo.register(fs) // --kubeconfig and --relist-period serve both modes
	no.register(fs)
	_ = fs.Parse(os.Args[1:]) // ExitOnError: a bad flag exits 2 with the usage
	no.kubeconfig, no.relist = fo.kubeconfig, fo.relist

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if fo.nodes > 0 {
		err = runFleet(ctx, fo, os.Stdout, nil)
	} else {
		err = runNode(ctx, no, os.Stdout, nil)
	}
	if err != nil {
		labenv.Fatal(err)
	}
}
