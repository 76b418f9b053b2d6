package podconfig

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// LineLogger is a logger for the kubelet's own config code (the file
// source, PodConfig, the mirror client), which reports bad manifests and
// failed writes only through its logger — never as a returned error. Each
// message up to verbosity v, and every error, becomes one line:
//
//	Could not process manifest file: invalid pod: name is needed for the pod (path=/…/manifests/bad.yaml)
//
// The file source re-reads its folder every period and logs the same
// error again each time; a line printed in the last repeatAfter is not
// printed again.
func LineLogger(print func(line string), v int, repeatAfter time.Duration) logr.Logger {
	return logr.New(&lineSink{print: print, v: v, repeatAfter: repeatAfter, shared: &recent{seen: map[string]time.Time{}}})
}

type recent struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

type lineSink struct {
	print       func(string)
	v           int
	repeatAfter time.Duration
	name        string
	values      []any
	shared      *recent
}

func (s *lineSink) Init(logr.RuntimeInfo)  {}
func (s *lineSink) Enabled(level int) bool { return level <= s.v }

func (s *lineSink) Info(_ int, msg string, kv ...any) {
	s.emit(msg, kv)
}

func (s *lineSink) Error(err error, msg string, kv ...any) {
	if err != nil {
		msg += ": " + err.Error()
	}
	s.emit(msg, kv)
}

func (s *lineSink) emit(msg string, kv []any) {
	var b strings.Builder
	if s.name != "" {
		b.WriteString(s.name + ": ")
	}
	b.WriteString(msg)
	var pairs []string
	all := append(append([]any{}, s.values...), kv...)
	for i := 0; i+1 < len(all); i += 2 {
		pairs = append(pairs, fmt.Sprintf("%v=%v", all[i], all[i+1]))
	}
	if len(pairs) > 0 {
		b.WriteString(" (" + strings.Join(pairs, " ") + ")")
	}
	line := b.String()
	now := time.Now()
	s.shared.mu.Lock()
	last, ok := s.shared.seen[line]
	if ok && now.Sub(last) < s.repeatAfter {
		s.shared.mu.Unlock()
		return
	}
	s.shared.seen[line] = now
	s.shared.mu.Unlock()
	s.print(line)
}

func (s *lineSink) WithValues(kv ...any) logr.LogSink {
	c := *s
	c.values = append(append([]any{}, s.values...), kv...)
	return &c
}

func (s *lineSink) WithName(name string) logr.LogSink {
	c := *s
	if c.name != "" {
		name = c.name + "/" + name
	}
	c.name = name
	return &c
}
