package dashboard

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// What the dashboard sends is encoded once and shared: a sample's event
// when the sample is taken, a snapshot when a client first asks for one
// after a sample. Each is a frame, immutable once made, which every client
// writes from the same bytes; a client holds one frame at a time, while it
// writes it. The dashboard keeps the latest snapshot and the events of the
// last eventBacklog samples, so that
//
//   - a new stream starts from the latest snapshot, if the events since it
//     are kept, and needs no snapshot of its own;
//   - a stream that falls behind catches up from the kept events, and only
//     if it fell further behind than they go is it sent the latest snapshot
//     instead (encoded once for all the streams that need it);
//   - a client whose stream ended comes back with the id of the last event
//     it got (Last-Event-ID), and its new stream goes on from the kept
//     events, with no snapshot: events are encoded for a while after the
//     last stream ends (resumeGrace), so that a lone client finds them;
//   - a snapshot is encoded at most once per sample, whatever the number of
//     clients, and only when one asks.
//
// Invariant (d.mu): events holds the events of consecutive samples ending
// at head, or nothing; snap, if set, is of a sample at or before head.

// eventBacklog is how many samples' events the dashboard keeps, so that a
// stream may fall that far behind and still catch up event by event.
const eventBacklog = 8

// A frame is one encoded event of the stream.
type frame struct {
	seq  uint64 // of the sample it describes
	data []byte // "id: …\nevent: …\ndata: <JSON>\n\n", as written to a stream
	doc  []byte // a snapshot's JSON and a newline, within data (api/snapshot's body); nil for a sample event
}

// newFrame encodes v as the event of sample seq, of the given kind
// ("sample" or "snapshot"), with its id (see appendEventID). A snapshot also
// tells the client to come back a second after its stream ends.
func (d *Dashboard) newFrame(seq uint64, kind string, v any) (*frame, error) {
	js, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	data := make([]byte, 0, 64+len(js))
	if kind == "snapshot" {
		data = append(data, "retry: 1000\n"...)
	}
	data = d.appendEventID(append(data, "id: "...), seq)
	data = append(append(append(data, "\nevent: "...), kind...), "\ndata: "...)
	start := len(data)
	data = append(append(data, js...), "\n\n"...)
	f := &frame{seq: seq, data: data}
	if kind == "snapshot" {
		f.doc = data[start : len(data)-1]
	}
	return f, nil
}

// appendEventID appends the id of the event of sample seq: the dashboard's
// instance, a dot and seq ("k3x9a1.42"). A client sends back the id of the
// last event it got when it comes back (Last-Event-ID), and the stream goes
// on from there if the events since are kept; the instance tells the ids
// of another dashboard, one that was restarted, whose seq began again.
func (d *Dashboard) appendEventID(b []byte, seq uint64) []byte {
	return strconv.AppendUint(append(append(b, d.instance...), '.'), seq, 10)
}

// lastEventSeq returns the sample of the event whose id a client sent back
// (Last-Event-ID), if that was an event of this dashboard.
func (d *Dashboard) lastEventSeq(id string) (uint64, bool) {
	if len(id) > len(d.instance)+21 {
		return 0, false // more than an instance and 20 digits: not ours
	}
	instance, seq, ok := strings.Cut(id, ".")
	if !ok || instance != d.instance {
		return 0, false
	}
	n, err := strconv.ParseUint(seq, 10, 64)
	return n, err == nil
}

// encodeEvent encodes the latest sample's event. d.sampling is held.
func (d *Dashboard) encodeEvent(withRules bool) *frame {
	f, err := d.newFrame(d.seq, "sample", d.event(withRules))
	if err != nil {
		return nil // nothing the dashboard makes fails to encode; streams would then catch up from a snapshot
	}
	d.eventsEncoded.Add(1)
	return f
}

// publish makes the latest sample the head, with its event ev (nil if none
// was encoded), and wakes the streams. d.sampling is held.
func (d *Dashboard) publish(ev *frame) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.head = d.seq
	switch {
	case ev == nil:
		clear(d.events) // a gap: the events kept no longer lead to head
		d.events = d.events[:0]
	case len(d.events) == eventBacklog:
		copy(d.events, d.events[1:])
		d.events[len(d.events)-1] = ev
	default:
		d.events = append(d.events, ev)
	}
	close(d.advanced)
	d.advanced = make(chan struct{})
}

// after returns the kept event of the sample after seq, if the events kept
// lead from seq to head. d.mu is held.
func (d *Dashboard) after(seq uint64) (*frame, bool) {
	if len(d.events) == 0 || seq >= d.head {
		return nil, false
	}
	first := d.events[0].seq
	if seq+1 < first {
		return nil, false
	}
	return d.events[seq+1-first], true
}

// nextFrame returns what a stream that has sent every sample up to seq
// (nothing at all if fresh) sends next: the next sample's event if it is
// kept, else a snapshot; nil if the stream is up to date. It also returns
// a channel closed when there is more, and false if the dashboard is
// closed. It encodes a snapshot if none kept will do.
func (d *Dashboard) nextFrame(fresh bool, seq uint64) (*frame, <-chan struct{}, bool, error) {
	for {
		d.mu.Lock()
		closed, advanced := d.closed, d.advanced
		f, found := d.nextLocked(fresh, seq)
		d.mu.Unlock()
		switch {
		case closed:
			return nil, nil, false, nil
		case found:
			return f, advanced, true, nil
		}
		if err := d.encodeSnapshot(); err != nil {
			return nil, nil, false, err
		}
	}
}

// nextLocked is nextFrame without the encoding: it reports false if a
// snapshot must be encoded first. d.mu is held.
func (d *Dashboard) nextLocked(fresh bool, seq uint64) (*frame, bool) {
	if !fresh {
		if seq >= d.head {
			return nil, true
		}
		if ev, kept := d.after(seq); kept {
			return ev, true
		}
	}
	// A snapshot, if the events since it are kept (and it is news to the
	// stream).
	if s := d.snap; s != nil && (fresh || s.seq > seq) {
		if _, kept := d.after(s.seq); kept || s.seq == d.head {
			return s, true
		}
	}
	return nil, false
}

// currentSnapshot returns the snapshot of the latest sample, encoding it if
// no client has asked for it yet.
func (d *Dashboard) currentSnapshot() (*frame, error) {
	d.mu.Lock()
	f := d.snap
	current := f != nil && f.seq == d.head
	d.mu.Unlock()
	if current {
		return f, nil
	}
	if err := d.encodeSnapshot(); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.snap, nil
}

// encodeSnapshot encodes the latest sample's snapshot and keeps it, unless
// it is kept already (another client asked first). The values are copied
// out under d.sampling, and encoded without it, so that the sampler waits
// only for the copy.
func (d *Dashboard) encodeSnapshot() error {
	d.encoding.Lock()
	defer d.encoding.Unlock()
	d.sampling.Lock()
	d.mu.Lock()
	kept := d.snap != nil && d.snap.seq == d.seq
	d.mu.Unlock()
	if kept {
		d.sampling.Unlock()
		return nil
	}
	snap := d.snapshot()
	d.sampling.Unlock()

	f, err := d.newFrame(snap.Seq, "snapshot", snap)
	if err != nil {
		return fmt.Errorf("encoding the snapshot: %w", err)
	}
	d.snapshotsEncoded.Add(1)
	d.mu.Lock()
	if d.snap == nil || f.seq > d.snap.seq {
		d.snap = f
	}
	d.mu.Unlock()
	return nil
}
