package liveview

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"kubelet-labs/mycore/journal"
)

// streamBuffer is how many entries may wait for a slow page before the
// newest are dropped (and the page told how many).
const streamBuffer = 4096

// hello is the first event of a stream: what the page shows.
type hello struct {
	Title string `json:"title"`
	Node  string `json:"node"`
	Fleet bool   `json:"fleet"`
}

// events streams the journal(s) as Server-Sent Events: "hello", every
// entry kept so far, then each new one as it is published ("entry",
// with its Seq as the event id), "dropped" when the page fell behind,
// and "end" when the node is gone.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")

	var subs []*journal.Subscription
	var kept []journal.Entry
	for _, b := range []*journal.Bus{s.o.Journal, s.o.Fleet} {
		if b == nil {
			continue
		}
		k, sub := b.Subscribe(streamBuffer)
		defer sub.Close()
		kept = append(kept, k...)
		subs = append(subs, sub)
	}
	send := func(event string, v any) error {
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data)
		return err
	}
	if send("hello", hello{Title: s.o.Title, Node: s.o.Journal.Node(), Fleet: s.o.Fleet != nil}) != nil {
		return
	}
	for _, e := range kept {
		if send("entry", e) != nil {
			return
		}
	}
	flusher.Flush()

	// one channel for both journals; gone closes once every journal
	// stopped (its node is gone)
	merged, gone := make(chan journal.Entry), make(chan struct{})
	var wg sync.WaitGroup
	for _, sub := range subs {
		wg.Go(func() {
			for e := range sub.C {
				select {
				case merged <- e:
				case <-r.Context().Done():
					return
				}
			}
		})
	}
	go func() { wg.Wait(); close(gone) }()
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	var dropped uint64
	for {
		select {
		case <-r.Context().Done():
			return
		case <-gone:
			_ = send("end", "the node stopped")
			flusher.Flush()
			return
		case e := <-merged:
			if send("entry", e) != nil {
				return
			}
			// send what else is waiting before flushing: one write per
			// burst, not per entry
			for more := true; more; {
				select {
				case e := <-merged:
					if send("entry", e) != nil {
						return
					}
				default:
					more = false
				}
			}
			var d uint64
			for _, sub := range subs {
				d += sub.Dropped()
			}
			if d != dropped {
				dropped = d
				if send("dropped", d) != nil {
					return
				}
			}
			flusher.Flush()
		case <-heartbeat.C:
			if _, err := fmt.Fprint(w, ": still here\n\n"); err != nil {
				return
			}
			flusher.Flush()
		}
	}
}
