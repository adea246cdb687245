package metrics_test

import (
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/metrics"

	"github.com/slidegate/slidegate/internal/exported"
)

// binOf is the guard's bin of response time d in [0, exported.BinRange),
// found by searching the edges exported.BinLow states.
func binOf(d time.Duration) int {
	for i := exported.Bins - 1; i >= 0; i-- {
		if exported.BinLow(i) <= d {
			return i
		}
	}
	panic("no bin")
}

// reported is the response time the guard reports for d: its bin's value,
// or BinRange for those beyond the bins.
func reported(d time.Duration) time.Duration {
	if d >= exported.BinRange {
		return exported.BinRange
	}
	return exported.BinValue(binOf(d))
}

// nativeBuckets decodes the positive native buckets of h, by index.
func nativeBuckets(h *dto.Histogram) map[int]int64 {
	out := map[int]int64{}
	i, n, next := 0, int64(0), 0
	for _, s := range h.GetPositiveSpan() {
		i = next + int(s.GetOffset())
		for range s.GetLength() {
			n += h.GetPositiveDelta()[0]
			h.PositiveDelta = h.PositiveDelta[1:]
			if n != 0 {
				out[i] = n
			}
			i++
		}
		next = i
	}
	return out
}

// histogramOf returns the histogram of family name with labels in mfs.
func histogramOf(t *testing.T, mfs []*dto.MetricFamily, name string, lbl map[string]string) *dto.Histogram {
	t.Helper()
	f := families{}
	for _, mf := range mfs {
		f[mf.GetName()] = mf
	}
	m := f.find(name, lbl)
	if m == nil || f[name].GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("no histogram %s%v", name, lbl)
	}
	return m.GetHistogram()
}

// TestRequestDurationMatchesAModel ends requests with random response
// times, batches and directions on the manual clock, and compares the
// histograms the registry gathers, classic and native buckets, with counts
// kept by brute force, and with the error bounds the package states.
func TestRequestDurationMatchesAModel(t *testing.T) {
	clk := clock.NewManual(start)
	g := newGuard(t, slidegate.WithClock(clk))
	bounds := metrics.DefaultBuckets()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewCollector(g))

	type model struct {
		times []time.Duration // one per request, a batch's repeated
	}
	models := map[string]*model{"GET /a": {}, "db": {}, "(inbound)": {}}
	rng := rand.New(rand.NewPCG(9, 4))
	for range 4000 {
		name, in := "db", false
		if rng.IntN(2) == 0 {
			name, in = "GET /a", true
		}
		var d time.Duration
		switch rng.IntN(5) {
		case 0:
			d = time.Duration(rng.Int64N(2500)) // below 2.5 µs: the zero bucket and the linear bins
		case 1:
			d = bounds[rng.IntN(len(bounds))] + time.Duration(rng.Int64N(3)-1) // at a bound, give or take 1 ns
		case 2:
			d = exported.BinRange + time.Duration(rng.Int64N(int64(time.Hour)))
		default:
			d = time.Duration(math.Exp2(10 + rng.Float64()*25)) // 1 µs to 9 min, log-uniform
		}
		n := int64(1)
		opts := []slidegate.EntryOption{}
		if in {
			opts = append(opts, slidegate.WithInbound())
		}
		if rng.IntN(5) == 0 {
			n = 1 + rng.Int64N(9)
			opts = append(opts, slidegate.WithCount(n))
		}
		e, err := g.EnterAt(context.Background(), clk.Now(), name, opts...)
		if err != nil {
			t.Fatal(err)
		}
		e.ExitAt(clk.Now()+int64(d), nil)
		for _, m := range []*model{models[name], models["(inbound)"]} {
			if m == models["(inbound)"] && !in {
				continue
			}
			for range n {
				m.times = append(m.times, d)
			}
		}
		clk.Advance(time.Duration(rng.Int64N(int64(100 * time.Millisecond))))
	}

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		family string
		lbl    map[string]string
		m      *model
	}{
		{"slidegate_request_duration_seconds", labels("resource", "GET /a", "direction", "inbound"), models["GET /a"]},
		{"slidegate_request_duration_seconds", labels("resource", "db", "direction", "outbound"), models["db"]},
		{"slidegate_inbound_request_duration_seconds", labels(), models["(inbound)"]},
	} {
		h := histogramOf(t, mfs, c.family, c.lbl)
		what := c.family + " " + c.lbl["resource"]
		if got := h.GetSampleCount(); got != uint64(len(c.m.times)) {
			t.Errorf("%s: count %d, want %d", what, got, len(c.m.times))
		}
		var sum float64
		for _, d := range c.m.times {
			sum += float64((d+500)/time.Microsecond) / 1e6 // the guard sums whole microseconds
		}
		if got := h.GetSampleSum(); math.Abs(got-sum) > 1e-6*sum {
			t.Errorf("%s: sum %v s, want %v s", what, got, sum)
		}

		// Classic: a request counts in le=B when the response time its bin
		// reports is at most B; so every one up to B/(1+BinError) does,
		// and none above B×(1+BinError), within 128 ns.
		if len(h.GetBucket()) != len(bounds) {
			t.Fatalf("%s: %d classic buckets, want %d", what, len(h.GetBucket()), len(bounds))
		}
		for k, b := range h.GetBucket() {
			bound := bounds[k]
			if b.GetUpperBound() != bound.Seconds() {
				t.Errorf("%s: bucket %d's bound %v, want %v", what, k, b.GetUpperBound(), bound.Seconds())
			}
			var want, surely, atMost uint64
			for _, d := range c.m.times {
				if reported(d) <= bound && d < exported.BinRange {
					want++
				}
				if float64(d) <= float64(bound)/(1+exported.BinError)-128 {
					surely++
				}
				if float64(d) <= float64(bound)*(1+exported.BinError)+128 {
					atMost++
				}
			}
			got := b.GetCumulativeCount()
			if got != want {
				t.Errorf("%s: le=%v counts %d, the model %d", what, bound, got, want)
			}
			if got < surely || got > atMost {
				t.Errorf("%s: le=%v counts %d, outside the stated bounds [%d, %d]", what, bound, got, surely, atMost)
			}
		}

		// Native: schema 3, each request in the bucket of its bin's
		// reported response time; below 256 ns in the zero bucket.
		if h.GetSchema() != 3 || h.GetZeroThreshold() != 256e-9 {
			t.Errorf("%s: schema %d, zero threshold %v; want 3 and 256 ns", what, h.GetSchema(), h.GetZeroThreshold())
		}
		wantNative, wantZero := map[int]int64{}, uint64(0)
		for _, d := range c.m.times {
			if d < 256 {
				wantZero++
				continue
			}
			i := int(math.Ceil(8 * math.Log2(reported(d).Seconds())))
			wantNative[i]++
			// The stated bound: from 2.048 µs up and below BinRange, a
			// request is in its own bucket, or in the next one up if it
			// lies within 1.6% below that bucket's lower bound.
			if d >= 2048 && d < exported.BinRange {
				lower, upper := math.Exp2(float64(i-1)/8), math.Exp2(float64(i)/8)
				if s := d.Seconds(); s > upper || s <= lower/1.016 {
					t.Errorf("%s: %v in the bucket (%v, %v]", what, d, lower, upper)
				}
			}
		}
		if h.GetZeroCount() != wantZero {
			t.Errorf("%s: zero bucket %d, want %d", what, h.GetZeroCount(), wantZero)
		}
		got := nativeBuckets(h)
		if len(got) != len(wantNative) {
			t.Errorf("%s: %d native buckets, want %d", what, len(got), len(wantNative))
		}
		for i, n := range wantNative {
			if got[i] != n {
				t.Errorf("%s: native bucket %d (%.4g s] counts %d, want %d", what, i, math.Exp2(float64(i)/8), got[i], n)
			}
		}
	}
}

// TestRequestDurationAtTheBounds puts response times either side of each
// default bound, beyond the stated error, and checks the buckets they land
// in.
func TestRequestDurationAtTheBounds(t *testing.T) {
	for _, bound := range metrics.DefaultBuckets() {
		clk := clock.NewManual(start)
		g := newGuard(t, slidegate.WithClock(clk))
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(metrics.NewCollector(g, metrics.WithBuckets(bound)))
		below := time.Duration(float64(bound) / (1 + exported.BinError))
		above := time.Duration(float64(bound)*(1+exported.BinError)) + 1
		for _, d := range []time.Duration{below, above} {
			e, err := g.EnterAt(context.Background(), clk.Now(), "r")
			if err != nil {
				t.Fatal(err)
			}
			e.ExitAt(clk.Now()+int64(d), nil)
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		h := histogramOf(t, mfs, "slidegate_request_duration_seconds", labels("resource", "r"))
		if got := h.GetBucket()[0].GetCumulativeCount(); got != 1 || h.GetSampleCount() != 2 {
			t.Errorf("%v and %v against le=%v: %d in the bucket of %d, want 1 of 2", below, above, bound, got, h.GetSampleCount())
		}
	}
}

// TestRequestDurationScrapes checks what each format carries: the text
// format the classic buckets only, the protobuf format the native buckets
// as well; and that promlint finds nothing to say.
func TestRequestDurationScrapes(t *testing.T) {
	g, _ := knownTraffic(t)
	s := newScraper(t, metrics.NewCollector(g))
	body := s.body(t)
	for _, want := range []string{
		`slidegate_request_duration_seconds_bucket{direction="inbound",resource="orders",le="0.001"} `,
		`slidegate_request_duration_seconds_bucket{direction="inbound",resource="orders",le="+Inf"} `,
		`slidegate_request_duration_seconds_count{direction="inbound",resource="orders"} `,
		`slidegate_inbound_request_duration_seconds_bucket{le="10"} `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the text format lacks %q", want)
		}
	}

	req, err := http.NewRequest(http.MethodGet, s.srv.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", `application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited`)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	var mfs []*dto.MetricFamily
	for {
		mf := new(dto.MetricFamily)
		if err := dec.Decode(mf); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		mfs = append(mfs, mf)
	}
	h := histogramOf(t, mfs, "slidegate_request_duration_seconds", labels("resource", "orders"))
	if h.GetSchema() != 3 || len(h.GetPositiveSpan()) == 0 || len(h.GetBucket()) != len(metrics.DefaultBuckets()) {
		t.Errorf("protobuf: schema %d, %d native spans, %d classic buckets; want 3, some, %d",
			h.GetSchema(), len(h.GetPositiveSpan()), len(h.GetBucket()), len(metrics.DefaultBuckets()))
	}
	if h.GetCreatedTimestamp() != nil {
		t.Errorf("protobuf: created %v, a time the guard does not know", h.GetCreatedTimestamp().AsTime())
	}

	problems, err := testutil.CollectAndLint(metrics.NewCollector(g), "slidegate_request_duration_seconds", "slidegate_inbound_request_duration_seconds")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// TestRequestDurationOfAnIdleResourceIsNoNaN checks a resource whose
// requests never ended, and one whose last ended long ago: their
// histograms are there, with counts and sums that are numbers.
func TestRequestDurationOfAnIdleResourceIsNoNaN(t *testing.T) {
	clk := clock.NewManual(start)
	g := newGuard(t, slidegate.WithClock(clk))
	open := mustEnterAt(t, g, clk, "never ended")
	defer open.Exit(nil)
	mustEnterAt(t, g, clk, "long ago").ExitAt(clk.Now()+int64(3*time.Millisecond), nil)
	clk.Advance(time.Hour)

	s := newScraper(t, metrics.NewCollector(g))
	for _, line := range strings.Split(s.body(t), "\n") {
		if strings.Contains(line, "request_duration") && strings.Contains(strings.ToLower(line), "nan") {
			t.Errorf("NaN: %s", line)
		}
	}
	f := s.scrape(t)
	for name, want := range map[string]uint64{"never ended": 0, "long ago": 1} {
		m := f.find("slidegate_request_duration_seconds", labels("resource", name))
		if m == nil {
			t.Fatalf("no histogram for %q", name)
		}
		if got := m.GetHistogram().GetSampleCount(); got != want {
			t.Errorf("%q: count %d, want %d", name, got, want)
		}
	}
}

func mustEnterAt(t *testing.T, g *slidegate.Guard, clk *clock.Manual, name string) slidegate.Entry {
	t.Helper()
	e, err := g.EnterAt(context.Background(), clk.Now(), name)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestWithBucketsRefusesBadBounds checks that registering a Collector with
// bounds out of order or out of range fails, naming the bound; and that no
// bounds leave only +Inf.
func TestWithBucketsRefusesBadBounds(t *testing.T) {
	g := newGuard(t)
	many := make([]time.Duration, metrics.MaxBuckets+1)
	for i := range many {
		many[i] = time.Duration(i+1) * time.Millisecond
	}
	for _, c := range []struct {
		bounds []time.Duration
		want   string
	}{
		{[]time.Duration{time.Millisecond, 0}, "buckets[1] = 0s"},
		{[]time.Duration{-time.Second}, "buckets[0] = -1s"},
		{[]time.Duration{time.Second, time.Second}, "buckets[1] = 1s"},
		{[]time.Duration{2 * time.Second, time.Second}, "buckets[1] = 1s"},
		{[]time.Duration{time.Second, 5 * time.Minute}, "buckets[1] = 5m0s"},
		{many, "65 bounds"},
	} {
		err := prometheus.NewPedanticRegistry().Register(metrics.NewCollector(g, metrics.WithBuckets(c.bounds...)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("WithBuckets(%v): register: %v, want an error naming %q", c.bounds, err, c.want)
		}
	}

	mustEnterAt(t, g, clock.NewManual(0), "r").Exit(nil)
	body := newScraper(t, metrics.NewCollector(g, metrics.WithBuckets())).body(t)
	var lines []string
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, `slidegate_request_duration_seconds_bucket{direction="outbound",resource="r"`) {
			lines = append(lines, line)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], `le="+Inf"`) {
		t.Errorf("WithBuckets(): buckets %q, want +Inf alone", lines)
	}
}
