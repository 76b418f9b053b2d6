package controlplane_test

import (
	"context"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"kubelet-labs/internal/controlplane"
)

// BenchmarkStart measures what a learner waits for: start → apiserver ready
// and controller-manager healthy (binaries already built), and the memory
// the three processes hold once up. Run with:
//
//	go test ./internal/controlplane -run '^$' -bench Start -benchtime 5x
func BenchmarkStart(b *testing.B) {
	var times []time.Duration
	var rss []float64
	for i := 0; i < b.N; i++ {
		cfg := ownConfig(b)
		t0 := time.Now()
		cp, err := controlplane.Start(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(t0))
		b.Logf("run %d: ready in %s", i+1, times[len(times)-1].Round(10*time.Millisecond))
		time.Sleep(5 * time.Second) // let the controllers settle before reading memory
		total := 0.0
		for name, pid := range cp.Pids() {
			m := rssMiB(pid)
			b.Logf("run %d: %s RSS %.0f MiB", i+1, name, m)
			total += m
		}
		rss = append(rss, total)
		if err := cp.Stop(); err != nil {
			b.Fatal(err)
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	sort.Float64s(rss)
	b.ReportMetric(float64(times[len(times)/2].Milliseconds()), "ms-to-ready(median)")
	b.ReportMetric(rss[len(rss)/2], "MiB-rss-3-procs(median)")
}

func rssMiB(pid int) float64 {
	data, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}
