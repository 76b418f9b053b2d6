package journal

import (
	"fmt"
	"testing"
	"time"
)

func TestBusKeepsTheLastEntriesInOrder(t *testing.T) {
	b := New(Options{Node: "n1", Backlog: 3})
	for i := 1; i <= 5; i++ {
		b.Printf(Other, "line %d", i)
	}
	got := b.Backlog()
	if len(got) != 3 {
		t.Fatalf("backlog has %d entries, want 3", len(got))
	}
	for i, e := range got {
		if want := fmt.Sprintf("line %d", i+3); e.Text != want || e.Seq != uint64(i+3) || e.Node != "n1" {
			t.Errorf("entry %d: seq %d node %q text %q, want seq %d node n1 %q", i, e.Seq, e.Node, e.Text, i+3, want)
		}
	}
}

func TestSinksSeeEveryEntryInOrderAndOnlyTextIsPrinted(t *testing.T) {
	b := New(Options{})
	var lines []string
	b.AddSink(PrintSink(func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) }))
	b.Publish(Entry{Kind: Relist, Took: time.Millisecond}) // the live view's only
	b.Printf(Sync, "sync    SyncPod(create) default/web")
	b.Publish(Line(Entry{Kind: CRI, Call: "RunPodSandbox", Took: 80 * time.Millisecond}, "CRI RunPodSandbox %s", "default/web"))
	want := []string{"sync    SyncPod(create) default/web", "CRI RunPodSandbox default/web"}
	if fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Errorf("printed %q, want %q", lines, want)
	}
}

func TestSubscribeHasNoGapNoRepeatAndDropsForASlowReader(t *testing.T) {
	b := New(Options{})
	b.Printf(Other, "before 1")
	b.Printf(Other, "before 2")
	kept, s := b.Subscribe(2)
	defer s.Close()
	for i := 1; i <= 4; i++ {
		b.Printf(Other, "after %d", i)
	}
	if len(kept) != 2 || kept[1].Text != "before 2" {
		t.Fatalf("backlog %v, want the two entries before Subscribe", kept)
	}
	if e := <-s.C; e.Text != "after 1" || e.Seq != 3 {
		t.Errorf("first live entry %d %q, want 3 \"after 1\"", e.Seq, e.Text)
	}
	if e := <-s.C; e.Text != "after 2" {
		t.Errorf("second live entry %q, want \"after 2\"", e.Text)
	}
	if d := s.Dropped(); d != 2 {
		t.Errorf("dropped %d, want 2 (buffer 2, four entries, none read while they came)", d)
	}
	b.Stop()
	if _, open := <-s.C; open {
		t.Error("C still open after Stop")
	}
}

func TestANilBusDropsEverything(t *testing.T) {
	var b *Bus
	b.Publish(Entry{Kind: Other, Text: "x"})
	b.Printf(Other, "y")
	kept, s := b.Subscribe(1)
	if len(kept) != 0 {
		t.Errorf("a nil bus kept %v", kept)
	}
	if _, open := <-s.C; open {
		t.Error("a nil bus's subscription is open")
	}
	s.Close()
	if Or(nil, nil) != nil {
		t.Error("Or(nil, nil) is not nil")
	}
}

func TestTheClockStampsEntries(t *testing.T) {
	at := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	b := New(Options{Now: func() time.Time { return at }})
	b.Printf(Other, "x")
	if got := b.Backlog()[0].At; !got.Equal(at) {
		t.Errorf("At = %v, want the injected %v", got, at)
	}
}

func TestABusNobodyReadsFormatsNothing(t *testing.T) {
	b := New(Options{Backlog: -1}) // a fleet node's: no sink, no backlog
	formatted := 0
	b.Say(Entry{Kind: Other}, "%v", stringer(func() string { formatted++; return "x" }))
	b.Publish(Entry{Kind: Relist})
	if formatted != 0 || b.Heard() {
		t.Errorf("formatted %d times (heard %v), want 0: nobody reads this bus", formatted, b.Heard())
	}
	_, s := b.Subscribe(1)
	defer s.Close()
	b.Say(Entry{Kind: Other}, "%v", stringer(func() string { formatted++; return "x" }))
	if formatted != 1 || (<-s.C).Text != "x" {
		t.Errorf("with a subscriber: formatted %d times, want 1", formatted)
	}
}

type stringer func() string

func (f stringer) String() string { return f() }

// BenchmarkSay: one step of a watched node — formatted, kept in the
// backlog, printed by a sink and sent to a live view — against one of fleet
// mode's nodes, which nobody reads.
func BenchmarkSay(b *testing.B) {
	e := Entry{Kind: CRI, Pod: "default/web", UID: "f9d44f15-2fd8-4d60-9a8d-6937c586ba1a", Call: "RunPodSandbox", Took: time.Millisecond}
	b.Run("watched", func(b *testing.B) {
		bus := New(Options{Node: "n1"})
		bus.AddSink(PrintSink(func(string, ...any) {}))
		_, s := bus.Subscribe(1024)
		defer s.Close()
		go func() {
			for range s.C {
			}
		}()
		b.ReportAllocs()
		for b.Loop() {
			bus.Say(e, "CRI RunPodSandbox %s/%s attempt %d → %s", "default", "web", 0, "9747c3eb3325f")
		}
	})
	b.Run("unread", func(b *testing.B) {
		bus := New(Options{Node: "n1", Backlog: -1})
		b.ReportAllocs()
		for b.Loop() {
			bus.Say(e, "CRI RunPodSandbox %s/%s attempt %d → %s", "default", "web", 0, "9747c3eb3325f")
		}
	})
}
