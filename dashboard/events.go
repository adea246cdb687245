package dashboard

import (
	"errors"
	"io"
	"net/http"
	"time"
)

const (
	// heartbeat is how often a quiet stream sends a comment, so that a
	// client gone without closing its connection is noticed, and proxies
	// keep the connection open.
	heartbeat = 15 * time.Second
	// writeTimeout bounds each write to a client, of one event or one
	// response: a client that takes longer to read it is dropped, and lets
	// go of the frame it held.
	writeTimeout = 5 * time.Second
	// retryAfter is the Retry-After of a request for a stream answered 503
	// for WithMaxStreams.
	retryAfter = "10"
	// resumeGrace is how long after the latest stream ended the sampler
	// still encodes events, on the dashboard's clock: for its client,
	// coming back a second later (a snapshot's "retry"), to go on from
	// them.
	resumeGrace = 10 * time.Second
)

// openStreams returns how many event streams are being served.
func (d *Dashboard) openStreams() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.streams
}

// serveEvents serves api/events: Server-Sent Events. The stream opens with a
// "snapshot" event (what api/snapshot serves), then sends a "sample" event
// (eventJSON) for each sample; a stream that falls behind by more than the
// events the dashboard keeps is sent a new "snapshot" instead of the events
// it missed. A client that comes back with the id of the last event it got
// (Last-Event-ID) goes on from the next event, if the dashboard keeps the
// events since, without a snapshot. The stream ends when the client goes
// away, takes longer than the write timeout to read an event, the stream
// has lasted its age (WithMaxStreamAge), or the dashboard is closed; the
// browser's EventSource then comes back. Beyond WithMaxStreams streams, it
// answers 503.
//
// The age bounds how long a client that reads nothing holds a slot: the
// dashboard cannot tell it from one that reads until the connection's
// buffers, which its client sizes, are full, and so its writes wait. That
// takes as long as the events take to fill them, which for a small guard
// may be hours; the age is the bound that does not depend on them.
func (d *Dashboard) serveEvents(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodHead {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		return
	}
	d.mu.Lock()
	closed, full, head := d.closed, d.streams >= d.maxStreams, d.head
	if !closed && !full {
		d.streams++
	}
	d.mu.Unlock()
	switch {
	case closed:
		httpError(w, http.StatusServiceUnavailable, "the dashboard is closed")
		return
	case full:
		w.Header().Set("Retry-After", retryAfter)
		httpError(w, http.StatusServiceUnavailable, "the dashboard serves as many event streams as it may; try again later")
		return
	}
	defer func() {
		now := d.clock.Now()
		d.mu.Lock()
		d.streams--
		d.streamEnded = max(d.streamEnded, now)
		d.mu.Unlock()
	}()

	leaveGuard(w)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)

	// send writes data and flushes it, within the write timeout.
	send := func(data []byte) bool {
		return d.setWriteDeadline(rc) && writeAll(w, data) && rc.Flush() == nil
	}
	ping := []byte(": ping\n\n")
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	age := time.NewTimer(d.streamAge)
	defer age.Stop()
	fresh, seq := true, uint64(0) // the last sample the client has
	if last, ok := d.lastEventSeq(r.Header.Get("Last-Event-ID")); ok && last <= head {
		fresh, seq = false, last
	}
	for {
		f, advanced, ok, err := d.nextFrame(fresh, seq)
		if !ok || err != nil {
			return
		}
		if f != nil {
			if !send(f.data) {
				return
			}
			fresh, seq = false, f.seq
			select {
			case <-age.C:
				d.end(rc)
				return
			default:
				continue // and hold the frame no longer
			}
		}
		select {
		case <-r.Context().Done():
			return
		case <-d.closing:
			return
		case <-age.C:
			d.end(rc)
			return
		case <-advanced:
		case <-tick.C:
			if !send(ping) {
				return
			}
		}
	}
}

// end gives the end of a stream that has lasted its age the write timeout
// to be written: the client is then told that the stream ended, and comes
// back, rather than finding its connection broken.
func (d *Dashboard) end(rc *http.ResponseController) { d.setWriteDeadline(rc) }

// setWriteDeadline gives the next write to a client d.writeTimeout. It
// reports false if the deadline could not be set; a ResponseWriter that
// does not support deadlines (one that is not the server's) leaves the
// server's own timeouts in charge.
func (d *Dashboard) setWriteDeadline(rc *http.ResponseController) bool {
	err := rc.SetWriteDeadline(time.Now().Add(d.writeTimeout))
	return err == nil || errors.Is(err, http.ErrNotSupported)
}

// writeAll writes data to w and reports whether it all went.
func writeAll(w io.Writer, data []byte) bool {
	_, err := w.Write(data)
	return err == nil
}

// leaveGuard ends the guard's entry of a stream's request when middleware
// that guards it lets it: httpguard.Middleware's writer has a method
// ExitGuard(), found here through Unwrap. A dashboard mounted behind the
// middleware would otherwise hold a request in flight, and count as
// response time, for as long as each stream lasts.
func leaveGuard(w http.ResponseWriter) {
	for {
		if x, ok := w.(interface{ ExitGuard() }); ok {
			x.ExitGuard()
			return
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return
		}
		w = u.Unwrap()
	}
}
