package controlplane_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"kubelet-labs/internal/controlplane"
	"kubelet-labs/internal/testenv"
)

// These tests start control planes of their own (not the shared one),
// because they stop, break or kill them.

func ownConfig(t testing.TB) controlplane.Config {
	root, binDir := testenv.Binaries(t)
	return controlplane.Config{Dir: t.TempDir(), BinDir: binDir, ModuleRoot: root, UnsafeNoFsync: true}
}

func TestStopLeavesNoProcessOrPort(t *testing.T) {
	cp, err := controlplane.Start(context.Background(), ownConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	pids := cp.Pids()
	ports := cp.Ports()
	if len(pids) != 3 {
		t.Fatalf("running components %v, want 3", pids)
	}
	if err := cp.Stop(); err != nil {
		t.Fatal(err)
	}
	testenv.AssertGone(t, pids, ports)
	if err := cp.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestPortInUseNamesTheComponent(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cfg := ownConfig(t)
	cfg.APIServerPort = l.Addr().(*net.TCPAddr).Port
	cp, err := controlplane.Start(context.Background(), cfg)
	if err == nil {
		cp.Stop()
		t.Fatal("started although the apiserver port is taken")
	}
	var pe *controlplane.PortInUseError
	if !errors.As(err, &pe) || pe.Component != "kube-apiserver" || pe.Port != cfg.APIServerPort {
		t.Fatalf("error %v, want a PortInUseError for kube-apiserver", err)
	}
	if !strings.Contains(err.Error(), "--apiserver-port") {
		t.Errorf("error does not say how to pick another port: %v", err)
	}
}

// TestChildExitingEarlyIsReported uses a fake etcd that dies at once: the
// error must name the component, its log file and quote the log.
func TestChildExitingEarlyIsReported(t *testing.T) {
	root, _ := testenv.Binaries(t)
	binDir := t.TempDir()
	for _, b := range controlplane.Binaries {
		script := "#!/bin/sh\necho 'fatal: disk on fire' >&2\nexit 3\n"
		if err := os.WriteFile(filepath.Join(binDir, b.Name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(binDir, ".kubernetes-version"), []byte(controlplane.KubernetesVersion), 0o644)
	dir := t.TempDir()
	cp, err := controlplane.Start(context.Background(), controlplane.Config{Dir: dir, BinDir: binDir, ModuleRoot: root})
	if err == nil {
		cp.Stop()
		t.Fatal("started with an etcd that exits")
	}
	msg := err.Error()
	for _, want := range []string{"etcd exited early", "exit status 3", filepath.Join(dir, "logs", "etcd.log"), "disk on fire"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
}

func TestSecondInstanceOnSameFolderIsRefused(t *testing.T) {
	cfg := ownConfig(t)
	cp, err := controlplane.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	second := cfg
	second.APIServerPort, second.EtcdPort, second.EtcdPeerPort, second.ControllerManagerPort = 0, 0, 0, 0
	if cp2, err := controlplane.Start(context.Background(), second); err == nil {
		cp2.Stop()
		t.Fatal("a second control plane started on the same state folder")
	} else if !strings.Contains(err.Error(), "already running") || !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) {
		t.Errorf("error does not say who runs it: %v", err)
	}
}

// startEtcd runs our etcd binary outside any control plane, with its data
// in dataDir, serving plain HTTP on port: a leftover, or a sibling.
func startEtcd(t *testing.T, binDir, dataDir string, port int) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "etcd"), "--data-dir="+dataDir,
		"--listen-client-urls=http://127.0.0.1:"+strconv.Itoa(port), "--advertise-client-urls=http://127.0.0.1:"+strconv.Itoa(port),
		"--listen-peer-urls=http://127.0.0.1:"+strconv.Itoa(freePort(t)))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	waitListening(t, port)
	return cmd, exited
}

// TestRecoversFromKilledRun leaves what a kill -9 of the owner can leave: a
// pid file and a still-running component of this state folder that holds
// the etcd port. Start must kill it and come up.
func TestRecoversFromKilledRun(t *testing.T) {
	cfg := ownConfig(t)
	port := freePort(t)
	cfg.EtcdPort = port
	leftover, exited := startEtcd(t, cfg.BinDir, filepath.Join(cfg.Dir, "etcd-of-the-killed-run"), port)
	os.WriteFile(filepath.Join(cfg.Dir, "pids"), fmt.Appendf(nil, "owner 999999\netcd %d\n", leftover.Process.Pid), 0o600)

	var progress strings.Builder
	cfg.Progress = &progress
	cp, err := controlplane.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("did not recover: %v\nprogress:\n%s", err, progress.String())
	}
	defer cp.Stop()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the leftover etcd is still running")
	}
	if !strings.Contains(progress.String(), "did not shut down cleanly") {
		t.Errorf("the recovery was not reported:\n%s", progress.String())
	}
}

// TestRecoveryLeavesAReusedPidAlone: the pid file of a killed run names a
// pid that now belongs to etcd of a sibling control plane (same binaries,
// another state folder). Recovery must not kill it.
func TestRecoveryLeavesAReusedPidAlone(t *testing.T) {
	cfg := ownConfig(t)
	sibling, exited := startEtcd(t, cfg.BinDir, filepath.Join(t.TempDir(), "etcd"), freePort(t))
	os.WriteFile(filepath.Join(cfg.Dir, "pids"), fmt.Appendf(nil, "owner 999999\netcd %d\n", sibling.Process.Pid), 0o600)

	var progress strings.Builder
	cfg.Progress = &progress
	cp, err := controlplane.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("did not start: %v\nprogress:\n%s", err, progress.String())
	}
	defer cp.Stop()
	if strings.Contains(progress.String(), "killing") {
		t.Errorf("recovery killed a process of another state folder:\n%s", progress.String())
	}
	select {
	case <-exited:
		t.Fatal("the sibling's etcd was killed")
	case <-time.After(500 * time.Millisecond):
	}
	if _, err := os.Stat(filepath.Join(cfg.Dir, "pids")); err != nil {
		t.Errorf("the new pid file is missing: %v", err)
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitListening(t *testing.T, port int) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("nothing listens on %d", port)
}
