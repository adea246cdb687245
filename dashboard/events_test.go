package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// newServer serves h until the test's end, after the streams the test opens
// later are closed (cleanups run last first).
func newServer(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// sse is one Server-Sent Event.
type sse struct {
	id, event, data string
}

// readEvent reads the next event from r, skipping comments and fields other
// than event and data.
func readEvent(r *bufio.Reader) (sse, error) {
	var ev sse
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev.data != "" {
				return ev, nil
			}
		case strings.HasPrefix(line, "id: "):
			ev.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			ev.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data += strings.TrimPrefix(line, "data: ")
		}
	}
}

// stream is a client of api/events.
type stream struct {
	r      *bufio.Reader
	resp   *http.Response
	cancel context.CancelFunc
}

func openStream(t *testing.T, url string) *stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &stream{r: bufio.NewReader(resp.Body), resp: resp, cancel: cancel}
	t.Cleanup(s.close)
	return s
}

func (s *stream) close() {
	s.cancel()
	s.resp.Body.Close()
}

func (s *stream) next(t *testing.T, wantEvent string, v any) {
	t.Helper()
	ev, err := readEvent(s.r)
	if err != nil {
		t.Fatalf("reading an event: %v", err)
	}
	if ev.event != wantEvent {
		t.Fatalf("event %q, want %q: %s", ev.event, wantEvent, ev.data)
	}
	if err := json.Unmarshal([]byte(ev.data), v); err != nil {
		t.Fatalf("decoding a %s event: %v\n%s", ev.event, err, ev.data)
	}
}

func TestEventsStreamASnapshotThenOneEventPerSample(t *testing.T) {
	f := newFixture(t, nil)
	f.requests(t, "GET /a", 3, time.Millisecond, false)
	f.step(time.Second)
	srv := newServer(t, f.d)

	s := openStream(t, srv.URL+"/api/events")
	if ct, cc := s.resp.Header.Get("Content-Type"), s.resp.Header.Get("Cache-Control"); ct != "text/event-stream" || cc != "no-cache" {
		t.Errorf("Content-Type %q, Cache-Control %q; want text/event-stream, no-cache", ct, cc)
	}
	var snap snapshotJSON
	s.next(t, "snapshot", &snap)
	if r, ok := findResource(snap, "GET /a"); snap.Seq != 1 || !ok || len(r.History.AllowedRate) != 1 || r.History.AllowedRate[0] != 3 {
		t.Fatalf("first snapshot: seq %d, resources %+v; want seq 1 with GET /a at 3 allowed/s", snap.Seq, snap.Resources)
	}
	if n := f.d.openStreams(); n != 1 {
		t.Errorf("%d streams with one open, want 1", n)
	}

	f.requests(t, "GET /a", 4, time.Millisecond, false)
	f.requests(t, "GET /b", 2, time.Millisecond, true)
	f.step(2 * time.Second)
	var ev eventJSON
	s.next(t, "sample", &ev)
	if ev.Seq != 2 || len(ev.Resources) != 2 || ev.Rules != nil {
		t.Fatalf("sample event: seq %d, %d resources, rules %v; want seq 2, 2 resources, no rules (unchanged)", ev.Seq, len(ev.Resources), ev.Rules)
	}
	a, b := ev.Resources[0], ev.Resources[1]
	if a.Name != "GET /a" || a.Point == nil || a.Point.AllowedRate != 2 || a.Point.FailedRate != 0 || a.History != nil {
		t.Errorf("GET /a in the event: %+v, point %+v; want its new point alone, 2 allowed/s", a, a.Point)
	}
	if b.Name != "GET /b" || b.Point == nil || b.Point.AllowedRate != 1 || b.Point.FailedRate != 1 || b.Stats.Totals.Failed != 2 {
		t.Errorf("GET /b in the event: %+v, point %+v; want 1 allowed/s, 1 failed/s", b, b.Point)
	}
	if math := a.Point.T - snap.Time; math < 1.999 || math > 2.001 {
		t.Errorf("new point %.3f s after the snapshot, want 2", math)
	}
}

func TestANewStreamStartsFromTheKeptSnapshotAndTheEventsSince(t *testing.T) {
	f := newFixture(t, nil)
	srv := newServer(t, f.d)
	a := openStream(t, srv.URL+"/api/events")
	var snap snapshotJSON
	a.next(t, "snapshot", &snap)
	var ev eventJSON
	for i := 1; i <= 3; i++ {
		f.requests(t, "x", i, 0, false)
		f.step(time.Second)
		a.next(t, "sample", &ev)
	}

	b := openStream(t, srv.URL+"/api/events")
	b.next(t, "snapshot", &snap)
	if snap.Seq != 0 {
		t.Errorf("second stream's snapshot of sample %d, want the kept one, 0", snap.Seq)
	}
	for want := uint64(1); want <= 3; want++ {
		b.next(t, "sample", &ev)
		if ev.Seq != want || len(ev.Resources) != 1 || ev.Resources[0].Point.AllowedRate != float64(want) {
			t.Fatalf("second stream's event of sample %d (%+v), want sample %d at %d allowed/s", ev.Seq, ev.Resources, want, want)
		}
	}
	if n := f.d.snapshotsEncoded.Load(); n != 1 {
		t.Errorf("%d snapshots encoded for two streams, want 1", n)
	}
	f.step(time.Second)
	for _, s := range []*stream{a, b} {
		s.next(t, "sample", &ev)
		if ev.Seq != 4 {
			t.Errorf("event of sample %d, want 4", ev.Seq)
		}
	}
}

func TestEventsCarryRulesWhenTheyChange(t *testing.T) {
	f := newFixture(t, nil)
	srv := newServer(t, f.d)
	s := openStream(t, srv.URL+"/api/events")
	var snap snapshotJSON
	s.next(t, "snapshot", &snap)

	f.step(time.Second)
	var ev eventJSON
	s.next(t, "sample", &ev)
	if ev.Rules != nil {
		t.Errorf("rules %+v in an event while they did not change", ev.Rules)
	}
	if err := f.g.SetRules(mustRules(t, `{"flow":[{"resource":"x","limit":7}]}`)); err != nil {
		t.Fatal(err)
	}
	f.step(time.Second)
	s.next(t, "sample", &ev)
	if ev.Rules == nil || len(ev.Rules.Flow) != 1 || ev.Rules.Flow[0].Limit != 7 {
		t.Errorf("rules %+v after SetRules, want the new ones", ev.Rules)
	}
}

func TestClientDisconnectEndsItsStream(t *testing.T) {
	f := newFixture(t, nil)
	srv := newServer(t, f.d)

	s1, s2 := openStream(t, srv.URL+"/api/events"), openStream(t, srv.URL+"/api/events")
	var snap snapshotJSON
	s1.next(t, "snapshot", &snap)
	s2.next(t, "snapshot", &snap)
	if n := f.d.openStreams(); n != 2 {
		t.Fatalf("%d streams, want 2", n)
	}
	s1.close()
	waitFor(t, "one stream", func() bool { return f.d.openStreams() == 1 })
	// The handler notices a gone client on its own, without a sample.
	s2.close()
	waitFor(t, "no stream", func() bool { return f.d.openStreams() == 0 })
	f.step(time.Second) // and sampling with none is fine
}

func TestCloseEndsStreamsAndAnswersNewOnes503(t *testing.T) {
	f := newFixture(t, nil)
	srv := newServer(t, f.d)
	s := openStream(t, srv.URL+"/api/events")
	var snap snapshotJSON
	s.next(t, "snapshot", &snap)

	f.d.Close()
	if _, err := readEvent(s.r); err != io.EOF {
		t.Errorf("reading a stream after Close: %v, want io.EOF", err)
	}
	waitFor(t, "no stream", func() bool { return f.d.openStreams() == 0 })
	resp, err := http.Get(srv.URL + "/api/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("api/events after Close: %d, want 503", resp.StatusCode)
	}
}

func TestSamplerKeepsTheEventsOfTheLastSamplesOnly(t *testing.T) {
	f := newFixture(t, nil)
	f.d.mu.Lock()
	f.d.streams++ // a stream that reads nothing: the sampler never waits for it
	f.d.mu.Unlock()
	for range 3 * eventBacklog {
		f.step(time.Second)
	}
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	if n := len(f.d.events); n != eventBacklog {
		t.Fatalf("%d events kept, want %d", n, eventBacklog)
	}
	for i, ev := range f.d.events {
		if want := f.d.head - eventBacklog + 1 + uint64(i); ev.seq != want {
			t.Errorf("event %d kept is of sample %d, want %d", i, ev.seq, want)
		}
	}
	if got := f.d.eventsEncoded.Load(); got != 3*eventBacklog {
		t.Errorf("%d events encoded for %d samples", got, 3*eventBacklog)
	}
}

func TestNoEventIsEncodedWithoutAStream(t *testing.T) {
	f := newFixture(t, nil)
	f.requests(t, "a", 3, 0, false)
	for range 5 {
		f.step(time.Second)
	}
	if n, kept := f.d.eventsEncoded.Load(), len(f.d.events); n != 0 || kept != 0 {
		t.Errorf("%d events encoded and %d kept with no stream, want none", n, kept)
	}
	if n := f.d.snapshotsEncoded.Load(); n != 0 {
		t.Errorf("%d snapshots encoded before any client asked", n)
	}
}

// pipeWriter is a ResponseWriter whose writes wait for the test to read
// them, as a slow client's would.
type pipeWriter struct {
	h http.Header
	w *io.PipeWriter
}

func (p *pipeWriter) Header() http.Header         { return p.h }
func (p *pipeWriter) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p *pipeWriter) WriteHeader(int)             {}
func (p *pipeWriter) Flush()                      {}

func TestASlowStreamGetsASnapshotInsteadOfWhatItMissed(t *testing.T) {
	f := newFixture(t, nil)
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req := httptest.NewRequest(http.MethodGet, "/api/events", nil).WithContext(ctx)
		f.d.ServeHTTP(&pipeWriter{h: http.Header{}, w: pw}, req)
	}()
	defer func() {
		cancel()
		pr.Close()
		<-done
	}()
	r := bufio.NewReader(pr)
	ev, err := readEvent(r)
	if err != nil || ev.event != "snapshot" {
		t.Fatalf("first event %q, %v; want a snapshot", ev.event, err)
	}

	// The client reads nothing while 20 samples are taken: the handler holds
	// one event in its write, and the dashboard keeps eventBacklog.
	const samples = 20
	for i := 1; i <= samples; i++ {
		f.requests(t, "a", i, 0, false)
		f.step(time.Second)
	}
	// The stream catches up: every sample event follows the last event it
	// sent, and a snapshot stands for the events it dropped.
	var lastSeq uint64
	samplesSent, snapshots := 0, 0
	for lastSeq < samples {
		ev, err := readEvent(r)
		if err != nil {
			t.Fatal(err)
		}
		switch ev.event {
		case "snapshot":
			var snap snapshotJSON
			if err := json.Unmarshal([]byte(ev.data), &snap); err != nil {
				t.Fatal(err)
			}
			if res, _ := findResource(snap, "a"); snap.Seq < lastSeq || len(res.History.AllowedRate) != int(snap.Seq) {
				t.Fatalf("catch-up snapshot: seq %d with %d points, after seq %d", snap.Seq, len(res.History.AllowedRate), lastSeq)
			}
			lastSeq = snap.Seq
			snapshots++
		case "sample":
			var e eventJSON
			if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
				t.Fatal(err)
			}
			if e.Seq != lastSeq+1 {
				t.Fatalf("sample %d after %d: a gap without a snapshot", e.Seq, lastSeq)
			}
			lastSeq = e.Seq
			samplesSent++
		}
	}
	if snapshots == 0 || samplesSent >= samples {
		t.Errorf("%d samples and %d snapshots sent for %d samples: the stream never fell behind", samplesSent, snapshots, samples)
	}
	// Then the stream goes on from the snapshot, without repeating.
	f.step(time.Second)
	ev, err = readEvent(r)
	var e eventJSON
	if err == nil {
		err = json.Unmarshal([]byte(ev.data), &e)
	}
	if err != nil || ev.event != "sample" || e.Seq != samples+1 {
		t.Errorf("after the snapshot: %q seq %d (%v); want sample %d", ev.event, e.Seq, err, samples+1)
	}
}
