package dashboard

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
)

// fill makes n resources with distinct names, takes a sample, and gives
// each resource, and the inbound traffic, a history of points: points of
// varied values, one a second up to the sample. (Taking that many samples of
// so many resources would take long under the race detector, and the
// history is what the test is about.)
func (f *fixture) fill(t *testing.T, n, points int) {
	t.Helper()
	for i := range n {
		e, err := f.g.Enter(context.Background(), fmt.Sprintf("GET /api/v1/items/%05d", i))
		if err != nil {
			t.Fatal(err)
		}
		e.ExitAt(f.clk.Now()+int64(i%97)*int64(time.Millisecond), nil)
	}
	f.step(time.Second)
	f.d.sampling.Lock()
	defer f.d.sampling.Unlock()
	if got := len(f.d.series); got != n {
		t.Fatalf("%d resources in the dashboard, want %d", got, n)
	}
	i := 0
	all := []*series{f.d.inbound}
	for _, s := range f.d.series {
		all = append(all, s)
	}
	for _, s := range all {
		newest, _ := s.lastPoint()
		s.ring, s.start = nil, 0
		for k := points - 1; k >= 0; k-- {
			x := float64(i*points + k)
			s.add(point{
				at: newest.at - int64(k)*int64(time.Second), allowed: x / 7, blocked: x / 13, failed: x / 17,
				inFlight: int64(k), p50: time.Duration(x) * time.Microsecond, p99: time.Duration(x) * time.Millisecond, breaker: closedBreaker,
			}, f.d.history)
		}
		i++
	}
}

// heapBytes returns the bytes of live heap objects, after collecting the
// garbage.
func heapBytes() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func allocatedBytes() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// stall opens a connection to addr, sends a GET for path, reads until the
// response's body has begun (so the server is writing it), and from then on
// reads nothing: a client that stalls on purpose. Its receive buffer is
// small, so the server's writes fill the server's buffers and wait.
func stall(t *testing.T, addr, path string) net.Conn {
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
	c.SetReadDeadline(time.Now().Add(time.Minute))
	var got []byte
	buf := make([]byte, 1024)
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if _, body, ok := bytes.Cut(got, []byte("\r\n\r\n")); ok && len(body) > 0 {
			break
		}
		if err != nil {
			t.Fatalf("GET %s: %v after %q", path, err, got)
		}
	}
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 200 ")) {
		t.Fatalf("GET %s: %q", path, got)
	}
	return c
}

// perConnection is what the test allows for each connection besides the
// dashboard's own bytes: net/http's buffers, request and goroutine, and the
// test's side of the connection.
const perConnection = 64 << 10

func TestStalledClientsHoldNoCopyOfTheSnapshot(t *testing.T) {
	const resources, history, streams, snapshotReaders, samples = 1024, defaultHistory, 40, 8, 20
	f := newFixture(t, []slidegate.Option{slidegate.WithMaxResources(resources)})
	f.fill(t, resources, history)
	srv := newServer(t, f.d)
	addr := srv.Listener.Addr().String()
	base := heapBytes()

	// What one snapshot and one sample event weigh, as a client that reads
	// receives them.
	code, _, body := get(t, srv.URL+"/api/snapshot")
	if code != http.StatusOK {
		t.Fatalf("api/snapshot: %d", code)
	}
	snapshotSize := len(body)
	body = ""

	for range streams {
		stall(t, addr, "/api/events")
	}
	for range snapshotReaders {
		stall(t, addr, "/api/snapshot")
	}
	// A client that reads what it is sent, which is served all the same.
	reader := openStream(t, srv.URL+"/api/events")
	ev, err := readEvent(reader.r)
	if err != nil || ev.event != "snapshot" {
		t.Fatalf("first event %q, %v", ev.event, err)
	}
	eventSize := 0
	for range samples {
		f.step(time.Second)
		ev, err := readEvent(reader.r)
		if err != nil || ev.event != "sample" {
			t.Fatalf("event %q, %v; want a sample", ev.event, err)
		}
		eventSize = max(eventSize, len(ev.data))
	}

	grown := int64(heapBytes()) - int64(base)
	// The package documentation's bound: the snapshot and the last
	// eventBacklog events are kept, and each write in progress may hold one
	// older snapshot or event; here every sample is within a write timeout
	// of the others.
	bound := int64((1+samples)*snapshotSize+(8+samples)*eventSize) + int64(streams+snapshotReaders+1)*perConnection
	t.Logf("%d resources, snapshot %d bytes, event %d bytes: heap grew by %.1f MiB with %d stalled streams and %d stalled snapshot reads; bound %.1f MiB",
		resources, snapshotSize, eventSize, float64(grown)/(1<<20), streams, snapshotReaders, float64(bound)/(1<<20))
	if grown > bound {
		t.Errorf("the heap grew by %d bytes, over the bound of %d", grown, bound)
	}
}

// drainEvent reads one event from r without keeping it, and returns its
// name, its size and the digest of its data.
func drainEvent(r *bufio.Reader) (name string, size int, sum [sha256.Size]byte, err error) {
	h := sha256.New()
	for {
		line, err := r.ReadSlice('\n')
		for err == bufio.ErrBufferFull {
			h.Write(line)
			size += len(line)
			line, err = r.ReadSlice('\n')
		}
		if err != nil {
			return "", 0, sum, err
		}
		switch {
		case len(line) == 1 && size > 0:
			h.Sum(sum[:0])
			return name, size, sum, nil
		case bytes.HasPrefix(line, []byte("event: ")):
			name = strings.TrimSpace(string(line[len("event: "):]))
		case bytes.HasPrefix(line, []byte("data: ")):
			h.Write(line)
			size += len(line)
		}
	}
}

// openDrained opens n streams of url at once, reads each one's first event
// without keeping it, checks that they are the same snapshot, and returns
// its size, the bytes the process allocated meanwhile, and a function that
// closes the streams.
func openDrained(t *testing.T, url string, n int) (size int, allocated uint64, closeAll func()) {
	t.Helper()
	before := allocatedBytes()
	var first [sha256.Size]byte
	var cancels []context.CancelFunc
	closeAll = func() {
		for _, c := range cancels {
			c()
		}
	}
	t.Cleanup(closeAll)
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cancels = append(cancels, cancel)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		cancels = append(cancels, func() { resp.Body.Close() })
		name, got, sum, err := drainEvent(bufio.NewReaderSize(resp.Body, 4<<10))
		if err != nil || name != "snapshot" {
			t.Fatalf("stream %d: first event %q, %v", i, name, err)
		}
		if i == 0 {
			first, size = sum, got
		} else if sum != first {
			t.Fatalf("stream %d got another snapshot than stream 0", i)
		}
	}
	return size, allocatedBytes() - before, closeAll
}

func TestASnapshotIsEncodedOnceWhateverTheStreams(t *testing.T) {
	const resources, streams = 256, 16
	f := newFixture(t, nil)
	f.fill(t, resources, defaultHistory)
	srv := newServer(t, f.d)

	// One stream, then (after a sample without it, once its client would
	// have come back, so that the snapshot must be encoded anew) many at
	// once: they cost one encoding too, and beyond it only their
	// connections.
	_, spent1, closeFirst := openDrained(t, srv.URL+"/api/events", 1)
	closeFirst()
	waitFor(t, "the first stream to end", func() bool { return f.d.openStreams() == 0 })
	f.step(resumeGrace)
	size, spent, _ := openDrained(t, srv.URL+"/api/events", streams)
	// Twice the first: the encoder's buffers may be warm for one encoding
	// and cold for the other.
	bound := 2*spent1 + streams*perConnection
	t.Logf("a %d-byte snapshot: 1 stream allocated %.1f MiB, %d streams %.1f MiB; bound %.1f MiB",
		size, float64(spent1)/(1<<20), streams, float64(spent)/(1<<20), float64(bound)/(1<<20))
	if spent > bound {
		t.Errorf("%d streams of a %d-byte snapshot allocated %d bytes, one stream %d: each stream costs more than its connection", streams, size, spent, spent1)
	}
	if n := f.d.snapshotsEncoded.Load(); n != 2 {
		t.Errorf("%d snapshots encoded for 1 stream, a sample and %d streams; want 2", n, streams)
	}
	// Every stream is sent every sample's event, encoded once.
	for i := 1; i <= 3; i++ {
		f.step(time.Second)
		if n := f.d.eventsEncoded.Load(); n != uint64(i) {
			t.Errorf("%d events encoded after %d samples with %d streams", n, i, streams)
		}
	}
}

func TestStreamsBeyondTheCapAreAnswered503(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []Option
		max  int
	}{
		{"default", nil, defaultMaxStreams},
		{"WithMaxStreams(2)", []Option{WithMaxStreams(2)}, 2},
		{"WithMaxStreams(1)", []Option{WithMaxStreams(1)}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil, tt.opts...)
			srv := newServer(t, f.d)
			var streams []*stream
			for range tt.max {
				s := openStream(t, srv.URL+"/api/events")
				var snap snapshotJSON
				s.next(t, "snapshot", &snap)
				streams = append(streams, s)
			}
			code, h, body := get(t, srv.URL+"/api/events")
			if code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || !strings.Contains(body, "event streams") {
				t.Errorf("stream %d: %d, Retry-After %q, %s; want 503 with a Retry-After", tt.max+1, code, h.Get("Retry-After"), body)
			}
			if n := f.d.openStreams(); n != tt.max {
				t.Errorf("%d streams served, want %d", n, tt.max)
			}
			// A stream that ends makes room for another.
			streams[0].close()
			waitFor(t, "a stream to end", func() bool { return f.d.openStreams() == tt.max-1 })
			s := openStream(t, srv.URL+"/api/events")
			if s.resp.StatusCode != http.StatusOK {
				t.Errorf("a stream after one ended: %d, want 200", s.resp.StatusCode)
			}
		})
	}
}

func TestAStalledStreamIsDroppedAfterTheWriteTimeout(t *testing.T) {
	f := newFixture(t, nil)
	f.d.writeTimeout = 100 * time.Millisecond // before any request: the handlers read it
	f.fill(t, 256, 1)                         // events of some 80 KB
	srv := newServer(t, f.d)
	stall(t, srv.Listener.Addr().String(), "/api/events")
	if n := f.d.openStreams(); n != 1 {
		t.Fatalf("%d streams, want 1", n)
	}
	// Samples fill the connection's buffers, then a write waits for the
	// client, and the write timeout ends the stream.
	deadline := time.Now().Add(time.Minute)
	for samples := 0; f.d.openStreams() > 0; samples++ {
		if time.Now().After(deadline) {
			t.Fatalf("the stalled stream is still served after %d samples", samples)
		}
		f.step(time.Second)
	}
}

// TestTheKeysAFrameCarriesAreBounded floods 20 resources with per-key rules,
// as an attacker would, with keys that are long and escape to six bytes a
// byte in JSON: a frame carries the keys of 16 of them, the most blocked,
// each with at most 2·defaultTopKeys keys, and the keys add to an event and
// a snapshot no more than the package documentation says.
func TestTheKeysAFrameCarriesAreBounded(t *testing.T) {
	const resources, keysEach = 20, 300
	f := newFixture(t, nil)
	bare, err := New(f.g, WithInterval(0), WithTopKeys(0)) // the same frames without keys
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bare.Close() })
	var rules slidegate.Rules
	for r := range resources {
		rules.Flow = append(rules.Flow, slidegate.FlowRule{Resource: fmt.Sprintf("r%02d", r), Limit: 1, PerKey: true})
	}
	if err := f.g.SetRules(rules); err != nil {
		t.Fatal(err)
	}
	escaped := strings.Repeat("<\x01\xff", 100) // 6 bytes each in JSON: \u003c \u0001 \ufffd
	for r := range resources {
		for k := range keysEach {
			// r00..r03 are blocked least: each key sends one request over
			// its limit, and r04.. two.
			f.keyed(t, fmt.Sprintf("r%02d", r), fmt.Sprintf("%04d", k)+escaped, 2+min(r/4, 1))
		}
	}
	f.clk.Advance(time.Millisecond)
	f.d.Sample()
	bare.Sample()

	sizes := func(d *Dashboard) (event, snapshot int) {
		d.sampling.Lock()
		ev := d.encodeEvent(false)
		d.sampling.Unlock()
		if err := d.encodeSnapshot(); err != nil {
			t.Fatal(err)
		}
		return len(ev.data), len(d.snap.data)
	}
	event, snapshot := sizes(f.d)
	bareEvent, bareSnapshot := sizes(bare)

	var carried []string
	for _, r := range f.snapshot(t).Resources {
		if r.Keys == nil {
			continue
		}
		carried = append(carried, r.Name)
		if n := len(r.Keys.Top); n < 1 || n > 2*defaultTopKeys {
			t.Errorf("%s carries %d keys, want 1 to %d", r.Name, n, 2*defaultTopKeys)
		}
		for _, k := range r.Keys.Top {
			if len(k.Key) > 3*64 { // U+FFFD takes 3 bytes decoded
				t.Errorf("%s: a key of %d bytes", r.Name, len(k.Key))
			}
		}
	}
	if len(carried) != maxKeyedResources || slices.ContainsFunc(carried, func(n string) bool { return n < "r04" }) {
		t.Errorf("the keys of %q, want those of the %d most blocked resources, r04 to r19", carried, maxKeyedResources)
	}
	// The package documentation's bound on what keys add to a frame.
	entry := len(`{"key":"","allowed":4294967295,"blocked":4294967295},`) + 6*64
	head := len(`,"keys":{"interval":1,"top":[]}`)
	bound := maxKeyedResources * (head + 2*defaultTopKeys*entry)
	t.Logf("%d resources flooded with %d keys each: keys add %d bytes to an event (%d without), %d to a snapshot (%d without); bound %d",
		resources, keysEach, event-bareEvent, bareEvent, snapshot-bareSnapshot, bareSnapshot, bound)
	if event-bareEvent > bound || snapshot-bareSnapshot > bound {
		t.Errorf("keys add %d bytes to an event and %d to a snapshot, over the bound of %d", event-bareEvent, snapshot-bareSnapshot, bound)
	}
}
