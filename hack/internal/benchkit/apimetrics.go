package benchkit

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubelet-labs/mycore/fleet"
)

// RequestTotals reads the apiserver's apiserver_request_total counter from
// /metrics: every request it answered, by verb, resource (with
// subresource) and HTTP code, whoever made it. It is how a benchmark
// counts a tool's calls without changing the tool; the delta over a run,
// minus what the benchmark's own client and the controller-manager made,
// is what the tool made.
func RequestTotals(ctx context.Context, c kubernetes.Interface) (map[fleet.Call]int64, error) {
	raw, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the apiserver's /metrics: %w", err)
	}
	return Counter(raw, "apiserver_request_total", func(l map[string]string) (fleet.Call, bool) {
		code, _ := strconv.Atoi(l["code"])
		resource := l["resource"]
		if sub := l["subresource"]; sub != "" {
			resource += "/" + sub
		}
		return fleet.Call{Verb: l["verb"], Resource: resource, Code: code}, true
	})
}

// ControllerManagerTotals reads the controller-manager's own count of its
// requests: client-go's rest_client_requests_total on its /metrics, by
// HTTP method and code (no resource). The apiserver's counter cannot say
// who made a request; the controller-manager's node lifecycle controller,
// for one, patches every new Node's taints and meets 409 Conflicts when
// the node's status changed meanwhile — its requests, not the tool's.
// The admin credential may read /metrics (system:masters).
func ControllerManagerTotals(ctx context.Context, cfg *rest.Config, port int) (map[fleet.Call]int64, error) {
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}, Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read the controller-manager's /metrics: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read the controller-manager's /metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read the controller-manager's /metrics: %s", resp.Status)
	}
	return Counter(raw, "rest_client_requests_total", func(l map[string]string) (fleet.Call, bool) {
		code, err := strconv.Atoi(l["code"]) // "<error>": never reached the apiserver
		return fleet.Call{Verb: l["method"], Code: code}, err == nil
	})
}

// Counter sums a Prometheus counter from the text format, keyed by call.
func Counter(raw []byte, name string, key func(map[string]string) (fleet.Call, bool)) (map[fleet.Call]int64, error) {
	out := map[fleet.Call]int64{}
	s := bufio.NewScanner(bytes.NewReader(raw))
	s.Buffer(make([]byte, 1<<20), 1<<20)
	prefix := name + "{"
	for s.Scan() {
		line := s.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			continue
		}
		if k, ok := key(parseLabels(line[len(prefix):end])); ok {
			out[k] += int64(v)
		}
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

// Minus is after - before - mine, as a list: what others made in between.
func Minus(after, before map[fleet.Call]int64, mine []fleet.CallCount) []fleet.CallCount {
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

// Delta is after - before of a client's own counts (fleet.Calls.Counts).
func Delta(after, before []fleet.CallCount) []fleet.CallCount {
	b := map[fleet.Call]int64{}
	for _, c := range before {
		b[c.Call] = c.Count
	}
	var out []fleet.CallCount
	for _, c := range after {
		if n := c.Count - b[c.Call]; n > 0 {
			out = append(out, fleet.CallCount{Call: c.Call, Count: n})
		}
	}
	return out
}

// OnResource counts the requests on a resource and its subresources
// ("pods": pods, pods/status, pods/eviction…).
func OnResource(counts []fleet.CallCount, resource string) (n int64) {
	for _, c := range counts {
		if c.Resource == resource || strings.HasPrefix(c.Resource, resource+"/") {
			n += c.Count
		}
	}
	return n
}
