package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// A subscriber is one event stream being served. The sampler never waits for
// it: it hands each event over through a small buffer, and if the buffer is
// full it drops the event and marks the stream as behind, which then sends a
// whole snapshot instead of the events it missed.
type subscriber struct {
	ch     chan message
	behind atomic.Bool   // an event was dropped
	quit   chan struct{} // closed by Close
}

// A message is one encoded "sample" event.
type message struct {
	seq  uint64
	data []byte
}

const (
	// subscriberBuffer is how many events a stream may fall behind before
	// it is sent a snapshot instead.
	subscriberBuffer = 8
	// heartbeat is how often a quiet stream sends a comment, so that a
	// client gone without closing its connection is noticed, and proxies
	// keep the connection open.
	heartbeat = 15 * time.Second
	// writeTimeout bounds each write to a stream: a client that reads
	// nothing for this long is dropped.
	writeTimeout = 30 * time.Second
)

// publish sends the latest sample to every stream. d.mu is held.
func (d *Dashboard) publish(withRules bool) {
	data, err := json.Marshal(d.event(withRules))
	if err != nil {
		return // nothing the dashboard makes fails to encode
	}
	m := message{seq: d.seq, data: data}
	for s := range d.subs {
		select {
		case s.ch <- m:
		default:
			s.behind.Store(true)
		}
	}
}

// subscribe registers a new stream, and returns it with a snapshot taken at
// the same moment, so that the stream's events follow the snapshot without a
// gap. It returns nil if the dashboard is closed.
func (d *Dashboard) subscribe() (*subscriber, snapshotJSON) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, snapshotJSON{}
	}
	s := &subscriber{ch: make(chan message, subscriberBuffer), quit: make(chan struct{})}
	d.subs[s] = struct{}{}
	return s, d.snapshot()
}

func (d *Dashboard) unsubscribe(s *subscriber) {
	d.mu.Lock()
	delete(d.subs, s)
	d.mu.Unlock()
}

// subscribers returns how many event streams are being served.
func (d *Dashboard) subscribers() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.subs)
}

// serveEvents serves api/events: Server-Sent Events. The stream opens with a
// "snapshot" event (what api/snapshot serves), then sends a "sample" event
// (eventJSON) for each sample; a stream that falls behind is sent a new
// "snapshot" instead of the events it missed. It ends when the client goes
// away or the dashboard is closed; the browser's EventSource then reconnects
// and starts again from a snapshot.
func (d *Dashboard) serveEvents(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodHead {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		return
	}
	sub, snap := d.subscribe()
	if sub == nil {
		httpError(w, http.StatusServiceUnavailable, "the dashboard is closed")
		return
	}
	defer d.unsubscribe(sub)

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)

	// send writes one event and flushes it, within writeTimeout.
	send := func(write func(io.Writer) error) bool {
		// An unsupported deadline (a ResponseWriter that is not the
		// server's) leaves the server's own timeouts in charge.
		if err := rc.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return false
		}
		if write(w) != nil {
			return false
		}
		return rc.Flush() == nil
	}
	sendSnapshot := func(snap snapshotJSON) bool {
		data, err := json.Marshal(snap)
		if err != nil {
			return false
		}
		return send(func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "retry: 1000\nevent: snapshot\ndata: %s\n\n", data)
			return err
		})
	}

	if !sendSnapshot(snap) {
		return
	}
	seq := snap.Seq // the last sample the client has
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-sub.quit:
			return
		case <-tick.C:
			if !send(func(w io.Writer) error { _, err := io.WriteString(w, ": ping\n\n"); return err }) {
				return
			}
		case m := <-sub.ch:
			if sub.behind.Swap(false) {
				d.mu.Lock()
				snap := d.snapshot()
				d.mu.Unlock()
				if !sendSnapshot(snap) {
					return
				}
				seq = snap.Seq
			}
			if m.seq <= seq {
				continue // the snapshot had it
			}
			if !send(func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "event: sample\ndata: %s\n\n", m.data)
				return err
			}) {
				return
			}
			seq = m.seq
		}
	}
}
