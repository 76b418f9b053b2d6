package cri

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"time"
)

// LogLine is one line a container wrote, as the runtime recorded it.
type LogLine struct {
	Time   time.Time
	Stream string // "stdout" or "stderr"
	Text   string
}

// ReadLog reads a CRI log file. The runtime (not the kubelet) writes it, one
// record per line:
//
//	2026-01-02T15:04:05.123456789Z stdout F hello
//
// time (RFC 3339 nano), stream, tag ("F" full line, "P" partial: the runtime
// split a long line at max_container_log_line_size, 16 KiB by default), text.
// Partial records are joined with the next ones of the same stream. The
// kubelet's reader is k8s.io/cri-client/pkg/logs (parseCRILog), used by
// `kubectl logs` through ReadLogs in pkg/kubelet/kuberuntime/kuberuntime_logs.go.
func ReadLog(path string) ([]LogLine, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var lines []LogLine
	partial := map[string]*LogLine{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		ts, stream, tag, text, err := parseLogRecord(sc.Bytes())
		if err != nil {
			return lines, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		l := partial[stream]
		if l == nil {
			l = &LogLine{Time: ts, Stream: stream}
		}
		l.Text += text
		if tag == "P" {
			partial[stream] = l
			continue
		}
		delete(partial, stream)
		lines = append(lines, *l)
	}
	return lines, sc.Err()
}

func parseLogRecord(rec []byte) (ts time.Time, stream, tag, text string, err error) {
	f := bytes.SplitN(rec, []byte(" "), 4)
	if len(f) < 3 {
		return ts, "", "", "", fmt.Errorf("not a CRI log record: %q", rec)
	}
	if ts, err = time.Parse(time.RFC3339Nano, string(f[0])); err != nil {
		return ts, "", "", "", fmt.Errorf("bad timestamp: %w", err)
	}
	stream, tag = string(f[1]), string(f[2])
	if stream != "stdout" && stream != "stderr" {
		return ts, "", "", "", fmt.Errorf("unknown stream %q", stream)
	}
	if len(f) == 4 {
		text = string(f[3])
	}
	// Old runtimes wrote no tag: "TIME STREAM TEXT". Treat it as full.
	if tag != "F" && tag != "P" {
		text, tag = tag+" "+text, "F"
		if len(f) == 3 {
			text = string(f[2])
		}
	}
	return ts, stream, tag, text, nil
}

// ContainerLog reads a container's log via the path the runtime reports.
// Only works on the machine the runtime runs on: the file is local.
func (c *Client) ContainerLog(ctx context.Context, containerID string) ([]LogLine, error) {
	st, err := c.ContainerStatus(ctx, containerID)
	if err != nil {
		return nil, err
	}
	if st.LogPath == "" {
		return nil, fmt.Errorf("container %.12s has no log file (its pod set no LogDirectory)", containerID)
	}
	return ReadLog(st.LogPath)
}
