package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"

	"kubelet-labs/mycore/fleet"
)

// requestTotals reads the apiserver's apiserver_request_total counter from
// /metrics: every request it answered, by verb, resource (with
// subresource) and HTTP code, whoever made it. It is how the benchmark
// counts KWOK's calls without changing KWOK; the delta over a run, minus
// what the benchmark's own client made, is what the tool and the
// controller-manager made.
func requestTotals(ctx context.Context, c kubernetes.Interface) (map[fleet.Call]int64, error) {
	raw, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the apiserver's /metrics: %w", err)
	}
	out := map[fleet.Call]int64{}
	s := bufio.NewScanner(bytes.NewReader(raw))
	s.Buffer(make([]byte, 1<<20), 1<<20)
	const name = "apiserver_request_total{"
	for s.Scan() {
		line := s.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		labels := parseLabels(line[len(name):end])
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			continue
		}
		code, _ := strconv.Atoi(labels["code"])
		resource := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			resource += "/" + sub
		}
		out[fleet.Call{Verb: labels["verb"], Resource: resource, Code: code}] += int64(v)
	}
	return out, s.Err()
}

// parseLabels reads `a="x",b="y"` (Prometheus text format; label values
// here never hold escaped quotes).
func parseLabels(s string) map[string]string {
	m := map[string]string{}
	for s != "" {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			break
		}
		key := s[:eq]
		rest := s[eq+2:]
		q := strings.IndexByte(rest, '"')
		if q < 0 {
			break
		}
		m[key] = rest[:q]
		s = strings.TrimPrefix(rest[q+1:], ",")
	}
	return m
}

// minus is after - before - mine, as a list: what others made in between.
func minus(after, before map[fleet.Call]int64, mine []fleet.CallCount) []fleet.CallCount {
	d := map[fleet.Call]int64{}
	for k, v := range after {
		d[k] = v - before[k]
	}
	for _, c := range mine {
		d[c.Call] -= c.Count
	}
	var out []fleet.CallCount
	for k, v := range d {
		if v > 0 {
			out = append(out, fleet.CallCount{Call: k, Count: v})
		}
	}
	return out
}
