package dashboard

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// idle opens a connection to addr with a small receive buffer and sends a
// GET for path, then reads nothing at all: a client that holds a stream's
// slot and takes none of what it is sent.
func idle(t *testing.T, addr, path string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.(*net.TCPConn).SetReadBuffer(4 << 10); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: dashboard\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
	return c
}

// trickle is idle, then reads one byte every interval until the connection
// ends or the test does: a client that reads, but too slowly to matter.
func trickle(t *testing.T, addr, path string, interval time.Duration) {
	t.Helper()
	c := idle(t, addr, path)
	done := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() {
		close(done)
		c.Close()
		wg.Wait()
	})
	wg.Go(func() {
		var b [1]byte
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if _, err := c.Read(b[:]); err != nil {
				return
			}
		}
	})
}

// A viewer is an honest client of api/events that reads all it is sent and
// comes back when its stream ends, as the page's EventSource does: with the
// id of the last event it got (Last-Event-ID). It records the samples it
// was told of, and its streams.
type viewer struct {
	url string

	mu      sync.Mutex
	seqs    []uint64 // the seq of each event, in order
	streams int      // streams opened
	resumed int      // streams that went on without a snapshot
	lastID  string
	err     error
}

// watch runs the viewer until ctx ends.
func (v *viewer) watch(ctx context.Context) {
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.url, nil)
		if err != nil {
			v.fail(err)
			return
		}
		v.mu.Lock()
		if v.lastID != "" {
			req.Header.Set("Last-Event-ID", v.lastID)
		}
		v.mu.Unlock()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				v.fail(err)
			}
			return
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			v.fail(fmt.Errorf("status %d", resp.StatusCode))
			return
		}
		v.mu.Lock()
		v.streams++
		v.mu.Unlock()
		r := bufio.NewReader(resp.Body)
		for first := true; ; first = false {
			ev, err := readEvent(r)
			if err != nil {
				break // the stream ended: come back
			}
			seq, err := strconv.ParseUint(ev.id[strings.LastIndexByte(ev.id, '.')+1:], 10, 64)
			v.mu.Lock()
			switch {
			case err != nil:
				v.err = fmt.Errorf("event %s with the id %q", ev.event, ev.id)
			case ev.event == "snapshot":
				v.seqs = append(v.seqs[:0], seq) // the page starts again from a snapshot
			default:
				v.seqs = append(v.seqs, seq)
				if first {
					v.resumed++
				}
			}
			v.lastID = ev.id
			v.mu.Unlock()
		}
		resp.Body.Close()
	}
}

func (v *viewer) fail(err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err == nil {
		v.err = err
	}
}

// check reports whether the viewer was told of every sample from its last
// snapshot to head, one after the other.
func (v *viewer) check(t *testing.T, head uint64) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err != nil {
		t.Errorf("the viewer: %v", v.err)
	}
	for i := 1; i < len(v.seqs); i++ {
		if v.seqs[i] != v.seqs[i-1]+1 {
			t.Errorf("the viewer was told of sample %d after %d", v.seqs[i], v.seqs[i-1])
			return
		}
	}
	if len(v.seqs) == 0 || v.seqs[len(v.seqs)-1] != head {
		t.Errorf("the viewer's last sample is not %d: %d samples", head, len(v.seqs))
	}
}

// sampling samples f's dashboard every interval, a second later each time
// on its clock, until the test ends or stop is called.
func sampling(t *testing.T, f *fixture, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	stop = func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
	t.Cleanup(stop)
	wg.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				f.requests(t, "GET /a", 3, time.Millisecond, false)
				f.step(time.Second)
			}
		}
	})
	return stop
}

// admitted opens a stream, and reports whether it was served.
func admitted(t *testing.T, url string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// slotBack waits until a new stream is served, and fails the test if it is
// not within limit.
func slotBack(t *testing.T, url string, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for !admitted(t, url) {
		if time.Since(start) > limit {
			t.Fatalf("a new viewer is still refused after %v", limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

// TestAViewerThatDoesNotReadLosesItsSlot: clients that ask for a stream
// and never read a byte of it, as many as the dashboard serves, hold its
// slots no longer than a stream's age and the write timeout, however little
// the samples fill their buffers; an honest viewer watching meanwhile is
// told of every sample, its stream going on from where it was when it
// ends.
func TestAViewerThatDoesNotReadLosesItsSlot(t *testing.T) {
	f := newFixture(t, nil)
	f.d.writeTimeout = 500 * time.Millisecond // before any request: the handlers read them
	f.d.streamAge = time.Second
	srv := newServer(t, f.d)
	url := srv.URL + "/api/events"
	f.requests(t, "GET /a", 3, time.Millisecond, false)
	f.step(time.Second)

	for range defaultMaxStreams - 1 {
		idle(t, srv.Listener.Addr().String(), "/api/events")
	}
	waitFor(t, "the idle streams", func() bool { return f.d.openStreams() == defaultMaxStreams-1 })
	ctx, cancel := context.WithCancel(context.Background())
	v := &viewer{url: url}
	var wg sync.WaitGroup
	wg.Go(func() { v.watch(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	waitFor(t, "the viewer's stream", func() bool { return f.d.openStreams() == defaultMaxStreams })
	if admitted(t, url) {
		t.Fatal("a stream beyond the cap was served")
	}
	stop := sampling(t, f, 100*time.Millisecond)

	took := slotBack(t, url, 10*time.Second)
	t.Logf("%d streams held by clients that never read: a new viewer was served after %v", defaultMaxStreams-1, took.Round(10*time.Millisecond))
	waitFor(t, "the idle streams to end", func() bool { return f.d.openStreams() <= 1 })

	// The viewer's stream ended at its age too, and went on.
	waitFor(t, "the viewer's stream to go on", func() bool {
		v.mu.Lock()
		defer v.mu.Unlock()
		return v.resumed >= 1 || v.err != nil
	})
	stop()
	f.d.mu.Lock()
	head := f.d.head
	f.d.mu.Unlock()
	waitFor(t, "the viewer to be told of the last sample", func() bool {
		v.mu.Lock()
		defer v.mu.Unlock()
		return len(v.seqs) > 0 && v.seqs[len(v.seqs)-1] == head || v.err != nil
	})
	cancel()
	wg.Wait()
	v.check(t, head)
}

// TestSlowReadersCannotHoldTheSlots: clients that read their streams a byte
// a second, as many as the dashboard serves, hold its slots no longer than
// a stream's age and the write timeout.
func TestSlowReadersCannotHoldTheSlots(t *testing.T) {
	const streams = 8
	f := newFixture(t, nil, WithMaxStreams(streams))
	f.d.writeTimeout = 500 * time.Millisecond
	f.d.streamAge = time.Second
	srv := newServer(t, f.d)
	url := srv.URL + "/api/events"
	for range streams {
		trickle(t, srv.Listener.Addr().String(), "/api/events", time.Second)
	}
	waitFor(t, "the slow streams", func() bool { return f.d.openStreams() == streams })
	sampling(t, f, 100*time.Millisecond)
	took := slotBack(t, url, 10*time.Second)
	t.Logf("%d streams read a byte a second: a new viewer was served after %v", streams, took.Round(10*time.Millisecond))
}

// openStreamFrom opens a stream as a client that comes back with the id of
// the last event it got.
func openStreamFrom(t *testing.T, url, lastID string) *stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Last-Event-ID", lastID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &stream{r: bufio.NewReader(resp.Body), resp: resp, cancel: cancel}
	t.Cleanup(s.close)
	return s
}

// TestAStreamThatComesBackGoesOnFromItsLastEvent: a stream ends at its
// age; its client, coming back with the id of the last event it got, is
// sent the events since, and no snapshot, even a lone client after a
// sample taken while it was away. An id the dashboard did not give, one of
// a sample it does not keep the events since, or one from the future,
// gets a snapshot, as a new client does.
func TestAStreamThatComesBackGoesOnFromItsLastEvent(t *testing.T) {
	f := newFixture(t, nil)
	f.d.streamAge = 200 * time.Millisecond
	srv := newServer(t, f.d)
	url := srv.URL + "/api/events"
	f.requests(t, "GET /a", 1, 0, false)
	f.step(time.Second)

	s := openStream(t, url)
	first, err := readEvent(s.r)
	if err != nil || first.event != "snapshot" || !strings.HasSuffix(first.id, ".1") {
		t.Fatalf("first event %q with id %q, %v; want the snapshot of sample 1", first.event, first.id, err)
	}
	if _, err := readEvent(s.r); err == nil {
		t.Fatal("an event on a stream past its age, want its end")
	}
	// Away, as the page is for a second: samples are taken meanwhile.
	waitFor(t, "the stream to end", func() bool { return f.d.openStreams() == 0 })
	f.step(time.Second)
	f.step(time.Second)
	back := openStreamFrom(t, url, first.id)
	for want := uint64(2); want <= 3; want++ {
		var ev eventJSON
		back.next(t, "sample", &ev)
		if ev.Seq != want {
			t.Fatalf("the stream that came back: sample %d, want %d", ev.Seq, want)
		}
	}
	if n := f.d.snapshotsEncoded.Load(); n != 1 {
		t.Errorf("%d snapshots encoded, want the first stream's alone", n)
	}

	for i := range eventBacklog {
		f.requests(t, "GET /a", i, 0, false)
		f.step(time.Second)
	}
	old := first.id // sample 1: the events since are no longer all kept
	for _, lastID := range []string{
		old,
		f.d.instance + ".999999",               // the future
		"k3x9a1.2",                             // another dashboard's
		f.d.instance + ".-1",                   // garbage
		f.d.instance + ".18446744073709551616", // beyond uint64
		strings.Repeat("9", 10<<10),            // long
		"",
	} {
		s := openStreamFrom(t, url, lastID)
		var snap snapshotJSON
		s.next(t, "snapshot", &snap)
		if snap.Seq != 3+eventBacklog {
			t.Errorf("Last-Event-ID %.40q: a snapshot of sample %d, want %d", lastID, snap.Seq, 3+eventBacklog)
		}
		s.close()
	}
}
