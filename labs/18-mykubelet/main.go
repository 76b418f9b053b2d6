// Lab 18 is the capstone: our own kubelet, every piece built in labs
// 07-17, run as one program.
//
//	go run ./labs/18-mykubelet --nodes 100    # fleet mode: 100 nodes on the mock runtime, one process
//
// Fleet mode lives in fleet.go; the benchmark against KWOK in bench/.
package main

import (
	"context"
	"errors"
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
	fo.register(fs)
	_ = fs.Parse(os.Args[1:]) // ExitOnError: a bad flag exits 2 with the usage

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if fo.nodes > 0 {
		err = runFleet(ctx, fo, os.Stdout, nil)
	} else {
		// TODO(lead): the single node on containerd (or the mock) replaces this.
		err = errors.New("the single-node mode of lab 18 is not written yet: run fleet mode with --nodes N (e.g. --nodes 10)")
	}
	if err != nil {
		labenv.Fatal(err)
	}
}
