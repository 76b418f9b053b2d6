package journal

import (
	"sync"
	"sync/atomic"
	"time"
)

// DefaultBacklog is how many entries a Bus keeps for a subscriber that
// comes late (a browser opened after the pods started): about ten minutes
// of a busy single node.
const DefaultBacklog = 8192

// Bus delivers each published Entry to its sinks, synchronously and in
// order (the terminal printer: a line is out before the step after it
// runs), and to its subscribers, asynchronously (the live view: a slow
// browser never holds up the kubelet; it misses entries instead and is
// told how many). A nil *Bus drops everything, so a part that may run
// without one publishes without checking.
type Bus struct {
	node    string
	now     func() time.Time
	backlog int

	mu      sync.Mutex
	seq     uint64
	ring    []Entry // the last backlog entries; ring[head] is the oldest once full
	head    int
	sinks   []func(Entry)
	subs    map[*Subscription]struct{}
	stopped bool
	// heard: someone reads what is published (a sink, a subscriber or the
	// backlog). A Bus nobody reads — each of fleet mode's thousand nodes —
	// neither formats nor keeps anything.
	heard atomic.Bool
}

// Options configure a Bus.
type Options struct {
	// Node names the node whose entries these are.
	Node string
	// Now is the clock (time.Now if nil).
	Now func() time.Time
	// Backlog is how many entries a late subscriber gets first
	// (DefaultBacklog if 0; negative keeps none).
	Backlog int
}

// New makes a Bus.
func New(o Options) *Bus {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Backlog == 0 {
		o.Backlog = DefaultBacklog
	}
	if o.Backlog < 0 {
		o.Backlog = 0
	}
	b := &Bus{node: o.Node, now: o.Now, backlog: o.Backlog, subs: map[*Subscription]struct{}{}}
	b.heard.Store(o.Backlog > 0)
	return b
}

// Printing is a Bus whose only sink prints each entry's Text with log —
// for a part given a log function and no Bus. A nil log gives a nil Bus.
func Printing(log func(format string, args ...any)) *Bus {
	if log == nil {
		return nil
	}
	b := New(Options{Backlog: -1})
	b.AddSink(PrintSink(log))
	return b
}

// Or is b, or, if b is nil, Printing(log): a part's options may give
// either.
func Or(b *Bus, log func(format string, args ...any)) *Bus {
	if b != nil {
		return b
	}
	return Printing(log)
}

// PrintSink prints an entry's Text with log: the terminal printer. An
// entry without Text (a relist, a node's state) prints nothing.
func PrintSink(log func(format string, args ...any)) func(Entry) {
	return func(e Entry) {
		if e.Text != "" {
			log("%s", e.Text)
		}
	}
}

// Node is the node this Bus reports on.
func (b *Bus) Node() string {
	if b == nil {
		return ""
	}
	return b.node
}

// AddSink adds a function every later Entry is given to, in order, on the
// publishing goroutine. It must not publish on this Bus.
func (b *Bus) AddSink(sink func(Entry)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sinks = append(b.sinks, sink)
	b.heard.Store(true)
}

// Heard says whether anything reads this Bus: a caller may skip building
// an entry nobody will see.
func (b *Bus) Heard() bool { return b != nil && b.heard.Load() }

// Publish stamps e (Seq, At unless set, Node unless set) and delivers it.
func (b *Bus) Publish(e Entry) {
	if !b.Heard() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	e.Seq = b.seq
	if e.At.IsZero() {
		e.At = b.now()
	}
	if e.Node == "" {
		e.Node = b.node
	}
	if b.backlog > 0 {
		if len(b.ring) < b.backlog {
			b.ring = append(b.ring, e)
		} else {
			b.ring[b.head] = e
			b.head = (b.head + 1) % b.backlog
		}
	}
	for _, s := range b.sinks {
		s(e)
	}
	for s := range b.subs {
		select {
		case s.c <- e:
		default:
			s.dropped++
		}
	}
}

// Printf publishes a printed line of kind with no other field.
func (b *Bus) Printf(kind Kind, format string, args ...any) {
	b.Say(Entry{Kind: kind}, format, args...)
}

// Say publishes e with its line from format, formatted only if anything
// reads the Bus.
func (b *Bus) Say(e Entry, format string, args ...any) {
	if !b.Heard() {
		return
	}
	b.Publish(Line(e, format, args...))
}

// Backlog is a copy of the entries kept, oldest first.
func (b *Bus) Backlog() []Entry {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.kept()
}

// kept is the ring oldest first (under b.mu).
func (b *Bus) kept() []Entry {
	out := make([]Entry, 0, len(b.ring))
	out = append(out, b.ring[b.head:]...)
	return append(out, b.ring[:b.head]...)
}

// Subscription receives a Bus's entries on C.
type Subscription struct {
	b *Bus
	c chan Entry
	// C delivers the entries published after Subscribe, in order; it is
	// closed by Close or when the Bus stops.
	C <-chan Entry
	// dropped counts entries C had no room for (under b.mu).
	dropped uint64
}

// Subscribe returns the entries kept so far and a Subscription to every
// later one, with no gap and no repeat between the two. buffer is how
// many entries may wait on C before they are dropped.
func (b *Bus) Subscribe(buffer int) ([]Entry, *Subscription) {
	c := make(chan Entry, buffer)
	s := &Subscription{b: b, c: c, C: c}
	if b == nil {
		close(c)
		return nil, s
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		close(c)
	} else {
		b.subs[s] = struct{}{}
		b.heard.Store(true)
	}
	return b.kept(), s
}

// Dropped is how many entries C had no room for so far.
func (s *Subscription) Dropped() uint64 {
	if s.b == nil {
		return 0
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	return s.dropped
}

// Close ends the subscription and closes C.
func (s *Subscription) Close() {
	if s.b == nil {
		return
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if _, ok := s.b.subs[s]; ok {
		delete(s.b.subs, s)
		close(s.c)
	}
}

// Stop closes every subscription: the node is gone. Later Publish calls
// still reach the sinks.
func (b *Bus) Stop() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopped = true
	for s := range b.subs {
		delete(b.subs, s)
		close(s.c)
	}
}
