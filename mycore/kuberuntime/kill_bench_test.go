package kuberuntime_test

import (
	"context"
	"testing"
	"time"

	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"kubelet-labs/internal/critest"
	"kubelet-labs/mycore/kuberuntime"
)

// The course's timing goals, as benchmarks (each op is a real stop, so run
// them with a small -benchtime, e.g. 5x):
//
//	go test ./mycore/kuberuntime -run XXX -bench Kill -benchtime 5x
//
// over-grace-ms is how long after the grace period the stop call
// returned: the runtime's SIGKILL, its exit handling and the CRI round
// trip. Goals: a SIGTERM-ignoring container within grace + 300 ms; KillPod
// of 3 such containers with grace 3 s within 3.5 s.

// BenchmarkKillContainerIgnoringSIGTERM: one container that ignores
// SIGTERM, grace 2 s (the minimum).
func BenchmarkKillContainerIgnoringSIGTERM(b *testing.B) {
	const grace = 2
	eachRuntimeB(b, func(b *testing.B, e *killEnv) {
		var over time.Duration
		for b.Loop() {
			b.StopTimer()
			pod := killPod("bench", grace, ctr("stubborn", stubbornScript))
			_, ids := e.start(b, pod)
			b.StartTimer()
			start := time.Now()
			r := e.m.KillContainer(context.Background(), pod, kubecontainer.ContainerID{ID: ids["stubborn"]}, "stubborn", kuberuntime.ReasonUnknown, nil)
			over += time.Since(start) - grace*time.Second
			if r.Error != nil {
				b.Fatal(r.Message)
			}
		}
		b.ReportMetric(float64(over.Milliseconds())/float64(b.N), "over-grace-ms")
	})
}

// BenchmarkKillPodThreeIgnoringSIGTERM: KillPod of three containers that
// ignore SIGTERM, grace 3 s, sandbox included.
func BenchmarkKillPodThreeIgnoringSIGTERM(b *testing.B) {
	const grace = 3
	eachRuntimeB(b, func(b *testing.B, e *killEnv) {
		var over time.Duration
		for b.Loop() {
			b.StopTimer()
			pod := killPod("bench", grace, ctr("one", stubbornScript), ctr("two", stubbornScript), ctr("three", stubbornScript))
			e.start(b, pod)
			running := e.runningPod(b, pod.UID)
			b.StartTimer()
			start := time.Now()
			r := e.m.KillPodWithSyncResult(context.Background(), pod, running, nil)
			over += time.Since(start) - grace*time.Second
			if err := r.Error(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(over.Milliseconds())/float64(b.N), "over-grace-ms")
	})
}

func eachRuntimeB(b *testing.B, f func(b *testing.B, e *killEnv)) {
	for _, rc := range critest.Cases() {
		b.Run(rc.Name, func(b *testing.B) { f(b, newKillEnv(b, rc)) })
	}
}
