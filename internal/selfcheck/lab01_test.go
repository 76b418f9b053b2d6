package main

import "testing"

// The pod check reads the line the kubelet's pod startup latency tracker
// writes (copied from a fake node's kubelet.log, v1.36.3).
func TestLab01PodStartedLine(t *testing.T) {
	line := `I1126 14:08:38.589447   12762 pod_startup_latency_tracker.go:148] "Observed pod startup duration" pod="default/nginx" podStartSLOduration=15.587898363 podStartE2EDuration="15.589318428s" totalImagesPullingTime="1.420065ms"`
	m := lab01PodStarted.FindStringSubmatch(line)
	if m == nil || m[1] != "15.589318428s" {
		t.Errorf("match %q, want podStartE2EDuration 15.589318428s", m)
	}
	other := `I1126 14:08:38.589447   12762 pod_startup_latency_tracker.go:148] "Observed pod startup duration" pod="default/nginx3" podStartE2EDuration="1s"`
	if lab01PodStarted.MatchString(other) {
		t.Errorf("matched another pod's line: %s", other)
	}
}
