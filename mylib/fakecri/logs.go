package fakecri

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CRI log format, as parsed by the kubelet (pkg/kubelet/kuberuntime/logs,
// v1.36.3) and crictl, and written by containerd's cio/logger:
//
//	2016-10-06T00:17:09.669794202Z stdout F log content
//	2016-10-06T00:17:09.669794202Z stderr P first part of a long line
//
// One record per line; lines longer than maxLogLine are split into
// partial (P) records followed by a full (F) one.

const maxLogLine = 16 << 10 // containerd's default max_container_log_line_size

// logFile is one container's log at sandbox log_directory + log_path.
// The file is made when the container starts (kubectl logs finds it,
// empty) but held open only from the first line written: a /pause that
// never writes holds no descriptor — in fleet mode, 20,000 silent
// containers were 20,000 open files, the process's limit here.
type logFile struct {
	mu      sync.Mutex
	path    string
	f       *os.File // nil until the first record, and after close
	closed  bool
	now     func() time.Time
	pending map[runtimeapi.LogStreamType][]byte // a line not yet ended by '\n'
}

func openLogFile(path string, now func() time.Time) (*logFile, error) {
	l := &logFile{path: path, now: now, pending: map[runtimeapi.LogStreamType][]byte{}}
	if err := l.create(); err != nil {
		return nil, err
	}
	return l, nil
}

// create makes the (empty) file without keeping it open.
func (l *logFile) create() error {
	if err := l.open(); err != nil {
		return err
	}
	err := l.f.Close()
	l.f = nil
	return err
}

func (l *logFile) open() error {
	if err := os.MkdirAll(filepath.Dir(l.path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	l.f = f
	return nil
}

// write appends output of one stream, emitting a record per complete line.
func (l *logFile) write(stream runtimeapi.LogStreamType, p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	buf := append(l.pending[stream], p...)
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		line := buf[:i]
		for len(line) > maxLogLine {
			l.record(stream, runtimeapi.LogTagPartial, line[:maxLogLine])
			line = line[maxLogLine:]
		}
		l.record(stream, runtimeapi.LogTagFull, line)
		buf = buf[i+1:]
	}
	for len(buf) > maxLogLine {
		l.record(stream, runtimeapi.LogTagPartial, buf[:maxLogLine])
		buf = buf[maxLogLine:]
	}
	l.pending[stream] = append([]byte(nil), buf...)
}

// record writes one log line; caller holds l.mu. Write errors are dropped
// on purpose: a container does not die because its log disk is full.
func (l *logFile) record(stream runtimeapi.LogStreamType, tag runtimeapi.LogTag, line []byte) {
	if l.f == nil && (l.closed || l.open() != nil) {
		return
	}
	var b bytes.Buffer
	b.Grow(len(line) + 48)
	b.WriteString(l.now().UTC().Format(time.RFC3339Nano))
	b.WriteByte(' ')
	b.WriteString(string(stream))
	b.WriteByte(' ')
	b.WriteString(string(tag))
	b.WriteByte(' ')
	b.Write(line)
	b.WriteByte('\n')
	l.f.Write(b.Bytes())
}

// flush writes unterminated lines as full records (the process exited).
func (l *logFile) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range []runtimeapi.LogStreamType{runtimeapi.Stdout, runtimeapi.Stderr} {
		if len(l.pending[s]) > 0 {
			l.record(s, runtimeapi.LogTagFull, l.pending[s])
			l.pending[s] = nil
		}
	}
}

// reopen closes and reopens the file, for the kubelet's log rotation
// (it renames the file, then calls ReopenContainerLog).
func (l *logFile) reopen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	return l.create()
}

func (l *logFile) close() {
	l.flush()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// containerIO fans a container's stdout/stderr out to its log file and
// to attached clients.
type containerIO struct {
	log *logFile // nil when the sandbox has no log_directory
	tty bool     // with a TTY everything is stdout, as in a real runtime

	mu     sync.Mutex
	subs   map[*attachSub]struct{}
	closed bool
}

// attachSub is one `crictl attach` client. It gets a buffered channel so
// a slow client can never block the container; if it falls behind by more
// than the buffer it is disconnected.
type attachSub struct {
	ch chan ioChunk
}

type ioChunk struct {
	stream runtimeapi.LogStreamType
	data   []byte
}

func (cio *containerIO) writer(stream runtimeapi.LogStreamType) *streamWriter {
	if cio.tty {
		stream = runtimeapi.Stdout
	}
	return &streamWriter{cio: cio, stream: stream}
}

type streamWriter struct {
	cio    *containerIO
	stream runtimeapi.LogStreamType
}

func (w *streamWriter) Write(p []byte) (int, error) {
	if w.cio.log != nil {
		w.cio.log.write(w.stream, p)
	}
	w.cio.mu.Lock()
	defer w.cio.mu.Unlock()
	for s := range w.cio.subs {
		select {
		case s.ch <- ioChunk{stream: w.stream, data: append([]byte(nil), p...)}:
		default:
			delete(w.cio.subs, s)
			close(s.ch)
		}
	}
	return len(p), nil
}

// subscribe returns nil if the container has already exited.
func (cio *containerIO) subscribe() *attachSub {
	cio.mu.Lock()
	defer cio.mu.Unlock()
	if cio.closed {
		return nil
	}
	if cio.subs == nil {
		cio.subs = map[*attachSub]struct{}{}
	}
	s := &attachSub{ch: make(chan ioChunk, 256)}
	cio.subs[s] = struct{}{}
	return s
}

func (cio *containerIO) unsubscribe(s *attachSub) {
	cio.mu.Lock()
	defer cio.mu.Unlock()
	if _, ok := cio.subs[s]; ok {
		delete(cio.subs, s)
		close(s.ch)
	}
}

// close ends all attach sessions and flushes the log (process exited).
func (cio *containerIO) close() {
	cio.mu.Lock()
	cio.closed = true
	for s := range cio.subs {
		delete(cio.subs, s)
		close(s.ch)
	}
	cio.mu.Unlock()
	if cio.log != nil {
		cio.log.close()
	}
}
