package rulefile

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/syncbuf"
)

// fakeSource is a Source whose rules and read error the test sets, and
// which counts its reads.
type fakeSource struct {
	mu      sync.Mutex
	rules   slidegate.Rules
	err     error
	reads   int
	closes  int
	closed  bool
	changes chan struct{}
}

func newFakeSource(r slidegate.Rules, err error) *fakeSource {
	return &fakeSource{rules: r, err: err, changes: make(chan struct{}, 1)}
}

func (s *fakeSource) Rules(ctx context.Context) (slidegate.Rules, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	return s.rules, s.err
}

func (s *fakeSource) Changes() <-chan struct{} { return s.changes }

func (s *fakeSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closes++
	if !s.closed {
		s.closed = true
		close(s.changes)
	}
	return nil
}

func (s *fakeSource) String() string { return "fake://rules" }

// set makes the source give r and err from now on, and signals a change.
func (s *fakeSource) set(r slidegate.Rules, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules, s.err = r, err
	if !s.closed {
		select {
		case s.changes <- struct{}{}:
		default:
		}
	}
}

// setQuietly makes the source give r and err from now on without a signal,
// as a server that comes back does.
func (s *fakeSource) setQuietly(r slidegate.Rules, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules, s.err = r, err
}

func (s *fakeSource) readCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

func (s *fakeSource) closeCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closes
}

// waitReads waits until src has been read n times, 10 s at most, and
// fails if it was read more.
func waitReads(t *testing.T, src *fakeSource, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for src.readCount() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d reads of the source within 10 s, want %d", src.readCount(), n)
		}
		time.Sleep(time.Millisecond)
	}
	if got := src.readCount(); got != n {
		t.Fatalf("%d reads of the source, want %d", got, n)
	}
}

func limitRules(limits ...int64) slidegate.Rules {
	var r slidegate.Rules
	for i, l := range limits {
		r.Flow = append(r.Flow, slidegate.FlowRule{Resource: "r" + strconv.Itoa(i), Limit: l})
	}
	return r
}

func limitsOf(g *slidegate.Guard) []int64 {
	var limits []int64
	for _, f := range g.Rules().Flow {
		limits = append(limits, f.Limit)
	}
	return limits
}

func sameLimits(a []int64, b ...int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// errUnreachable is a read error of a source that cannot be reached.
var errUnreachable = errors.New("dial tcp 10.0.0.1:2379: connect: connection refused")

// following starts a follower of src for g with opts, logging to the
// buffer it returns, and returns a function that waits for the follower's
// next OnReload call (10 s at most) and returns its error.
func following(t *testing.T, g *slidegate.Guard, src Source, opts ...Option) (*Follower, *syncbuf.Buffer, func() error) {
	t.Helper()
	log := &syncbuf.Buffer{}
	reloads := make(chan error, 100)
	opts = append([]Option{WithLogger(slog.New(slog.NewTextHandler(log, nil))), OnReload(func(err error) { reloads <- err })}, opts...)
	f, err := Follow(g, src, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, log, func() error {
		t.Helper()
		select {
		case err := <-reloads:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("no reload within 10 s")
			return nil
		}
	}
}

func TestFollowPutsAnUpdateInForce(t *testing.T) {
	g := newGuard(t)
	src := newFakeSource(limitRules(1), nil)
	_, log, next := following(t, g, src)
	if got := limitsOf(g); !sameLimits(got, 1) {
		t.Fatalf("limits %v at first, want [1]", got)
	}
	src.set(limitRules(2, 3), nil)
	if err := next(); err != nil {
		t.Fatal(err)
	}
	if got := limitsOf(g); !sameLimits(got, 2, 3) {
		t.Fatalf("limits %v after the update, want [2 3]", got)
	}
	for _, want := range []string{`level=INFO msg="slidegate: rules loaded" source=fake://rules`, `level=INFO msg="slidegate: rules reloaded" source=fake://rules`} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, log.String())
		}
	}
}

// Rules with problems, whether the source finds them (as Parse does) or the
// guard does, are refused whole, every problem is logged, and the rules in
// force stay.
func TestFollowKeepsAnInvalidUpdateOut(t *testing.T) {
	twoProblems := &slidegate.RulesError{Source: "fake://rules", Problems: []slidegate.Problem{
		{Rule: "flow[0]", Field: "limit", Reason: "first problem"},
		{Rule: "flow[1]", Field: "interval", Reason: "second problem"}}}
	for _, tc := range []struct {
		name  string
		rules slidegate.Rules
		err   error
		want  []string // in the log
	}{
		{"found by the source", slidegate.Rules{}, twoProblems, []string{"flow[0]: limit: first problem", "flow[1]: interval: second problem"}},
		{"found by the guard", limitRules(-1, -2), nil, []string{"flow[0] (resource \\\"r0\\\"): limit: -1", "flow[1] (resource \\\"r1\\\"): limit: -2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGuard(t)
			src := newFakeSource(limitRules(1), nil)
			_, log, next := following(t, g, src)
			src.set(tc.rules, tc.err)
			err := next()
			var rerr *slidegate.RulesError
			if !errors.As(err, &rerr) || len(rerr.Problems) != 2 {
				t.Fatalf("reload %v, want a *slidegate.RulesError with 2 problems", err)
			}
			if got := limitsOf(g); !sameLimits(got, 1) {
				t.Fatalf("limits %v after a refused update, want [1] still", got)
			}
			line := lineWith(log.String(), "rules refused")
			if !strings.Contains(line, "level=WARN") || !strings.Contains(line, "source=fake://rules") {
				t.Errorf("refusal logged as %q, want a Warn naming the source", line)
			}
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("refusal logged as %q, lacking the problem %q", line, w)
				}
			}
			// Either way the guard tells it as an event, once.
			var refused []slidegate.Event
			for _, e := range g.Events() {
				if e.Kind == "rules_refused" {
					refused = append(refused, e)
				}
			}
			if len(refused) != 1 || !errors.As(refused[0].Err, &rerr) || len(rerr.Problems) != 2 {
				t.Errorf("the guard's events of refusal: %+v, want one with the 2 problems", refused)
			}
		})
	}
}

// lineWith returns the first line of log containing s, or "".
func lineWith(log, s string) string {
	for line := range strings.Lines(log) {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}

// A source that cannot be read is read again 1 s, 2 s, 4 s… up to 30 s
// apart on the follower's clock, logged once when it goes and once when it
// comes back, with the rules in force kept meanwhile.
func TestFollowReadsAnUnreachableSourceAgainWithBackoff(t *testing.T) {
	g := newGuard(t)
	m := clock.NewManual(0)
	src := newFakeSource(limitRules(1), nil)
	_, log, next := following(t, g, src, WithClock(m))
	src.set(slidegate.Rules{}, errUnreachable)
	if err := next(); !errors.Is(err, errUnreachable) {
		t.Fatalf("reload %v, want the read error", err)
	}
	reads := 2
	for _, wait := range []time.Duration{1, 2, 4, 8, 16, 30, 30, 30} {
		wait *= time.Second
		asleep(t, m)
		m.Advance(wait - time.Millisecond)
		stillAsleep(t, m)
		waitReads(t, src, reads)
		m.Advance(time.Millisecond)
		reads++
		waitReads(t, src, reads)
	}
	if got := limitsOf(g); !sameLimits(got, 1) {
		t.Fatalf("limits %v during the outage, want [1] still", got)
	}
	src.setQuietly(limitRules(5), nil)
	asleep(t, m)
	m.Advance(retryMost)
	if err := next(); err != nil {
		t.Fatalf("reload %v once the source is back, want nil", err)
	}
	if got := limitsOf(g); !sameLimits(got, 5) {
		t.Fatalf("limits %v once the source is back, want [5]", got)
	}
	if n := strings.Count(log.String(), "rules cannot be read"); n != 1 {
		t.Errorf("the outage logged %d times, want once:\n%s", n, log.String())
	}
	if line := lineWith(log.String(), "rules can be read again"); !strings.Contains(line, "level=INFO") {
		t.Errorf("the end of the outage logged as %q, want at Info:\n%s", line, log.String())
	}
	// Back to normal: no timed read is left, and the next outage starts
	// again from 1 s.
	src.set(slidegate.Rules{}, errUnreachable)
	if err := next(); !errors.Is(err, errUnreachable) {
		t.Fatalf("reload %v, want the read error", err)
	}
	asleep(t, m)
	reads = src.readCount()
	m.Advance(time.Second)
	waitReads(t, src, reads+1)
}

// A change signalled during an outage reads the source at once, and the
// timed reads go on without a second timer.
func TestFollowReadsAnUnreachableSourceOnAChange(t *testing.T) {
	g := newGuard(t)
	m := clock.NewManual(0)
	src := newFakeSource(limitRules(1), nil)
	_, _, next := following(t, g, src, WithClock(m))
	src.set(slidegate.Rules{}, errUnreachable)
	if err := next(); !errors.Is(err, errUnreachable) {
		t.Fatalf("reload %v, want the read error", err)
	}
	asleep(t, m)
	src.set(slidegate.Rules{}, errUnreachable)
	waitReads(t, src, 3)
	stillAsleep(t, m)
	src.set(limitRules(4), nil)
	if err := next(); err != nil {
		t.Fatalf("reload %v once the source is back, want nil", err)
	}
	if got := limitsOf(g); !sameLimits(got, 4) {
		t.Fatalf("limits %v once the source is back, want [4]", got)
	}
	// The timed read is cancelled, and its goroutine gone.
	deadline := time.Now().Add(10 * time.Second)
	for m.Sleepers() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the timed read still waits after the source came back")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestFollowMakesNoReloadForTheSameRules(t *testing.T) {
	g := newGuard(t)
	src := newFakeSource(limitRules(1, 2), nil)
	_, log, next := following(t, g, src)
	src.set(limitRules(1, 2), nil) // equal, not the same slices
	waitReads(t, src, 2)
	src.set(limitRules(-1), nil)
	if err := next(); err == nil {
		t.Fatal("the first reload was not the refused rules")
	}
	src.set(limitRules(-1), nil) // the same refused rules: no second refusal
	waitReads(t, src, 4)
	src.set(limitRules(3), nil)
	if err := next(); err != nil {
		t.Fatalf("reload %v, want nil", err)
	}
	if got := limitsOf(g); !sameLimits(got, 3) {
		t.Fatalf("limits %v, want [3]", got)
	}
	if n := strings.Count(log.String(), "rules reloaded"); n != 1 {
		t.Errorf("%d reloads logged, want 1:\n%s", n, log.String())
	}
	if n := strings.Count(log.String(), "rules refused"); n != 1 {
		t.Errorf("%d refusals logged, want 1:\n%s", n, log.String())
	}
}

// Close stops the follower's goroutine and its timed reads, closes the
// source, and may be called again.
func TestFollowerCloseStopsEverything(t *testing.T) {
	g := newGuard(t)
	m := clock.NewManual(0)
	c := &slowWaker{Manual: m}
	src := newFakeSource(limitRules(1), nil)
	f, _, next := following(t, g, src, WithClock(c))
	src.set(slidegate.Rules{}, errUnreachable)
	if err := next(); !errors.Is(err, errUnreachable) {
		t.Fatalf("reload %v, want the read error", err)
	}
	asleep(t, m) // a timed read waits
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-f.done:
	default:
		t.Fatal("the follower's goroutine still runs after Close")
	}
	if n := c.sleeping.Load(); n != 0 {
		t.Fatalf("%d timed reads still wait after Close", n)
	}
	if n := src.closeCount(); n != 1 {
		t.Fatalf("the source closed %d times by Close, want 1", n)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if n := src.closeCount(); n != 1 {
		t.Fatalf("the source closed %d times after a second Close, want 1", n)
	}
	if got := limitsOf(g); !sameLimits(got, 1) {
		t.Fatalf("limits %v after Close, want [1] still", got)
	}
}

// slowWaker is a Manual clock whose sleepers take a while to wake, and
// which counts the goroutines in Sleep, so that a Close that returns
// before its goroutines have ended is caught.
type slowWaker struct {
	*clock.Manual
	sleeping atomic.Int32
}

func (c *slowWaker) Sleep(ctx context.Context, d time.Duration) error {
	c.sleeping.Add(1)
	defer c.sleeping.Add(-1)
	err := c.Manual.Sleep(ctx, d)
	time.Sleep(20 * time.Millisecond)
	return err
}

// A source that closes its Changes channel on its own has failed for good:
// the follower logs it and stops, and the rules stay.
func TestFollowLogsASourceThatStops(t *testing.T) {
	g := newGuard(t)
	src := newFakeSource(limitRules(1), nil)
	f, log, _ := following(t, g, src)
	src.Close()
	select {
	case <-f.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the follower still runs 10 s after its source stopped")
	}
	if line := lineWith(log.String(), "rules source stopped"); !strings.Contains(line, "level=WARN") || !strings.Contains(line, "source=fake://rules") {
		t.Errorf("the stop logged as %q, want a Warn naming the source:\n%s", line, log.String())
	}
	if got := limitsOf(g); !sameLimits(got, 1) {
		t.Fatalf("limits %v after the source stopped, want [1] still", got)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// Changes signalled from many goroutines while the follower reads end with
// the last rules in force.
func TestFollowUnderConcurrentChanges(t *testing.T) {
	g := newGuard(t)
	src := newFakeSource(limitRules(1), nil)
	following(t, g, src)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				if i%7 == 0 {
					src.set(slidegate.Rules{}, errUnreachable)
				} else {
					src.set(limitRules(int64(w*1000+i)), nil)
				}
			}
		}()
	}
	wg.Wait()
	src.set(limitRules(99999), nil)
	deadline := time.Now().Add(10 * time.Second)
	for !sameLimits(limitsOf(g), 99999) {
		if time.Now().After(deadline) {
			t.Fatalf("limits %v 10 s after the last change, want [99999]", limitsOf(g))
		}
		time.Sleep(time.Millisecond)
	}
}

func TestFollowWithoutLastGoodReturnsTheSourceError(t *testing.T) {
	bad := &slidegate.RulesError{Problems: []slidegate.Problem{{Reason: "bad"}}}
	for _, tc := range []struct {
		name  string
		rules slidegate.Rules
		err   error
		opts  []Option
	}{
		{"unreachable", slidegate.Rules{}, errUnreachable, nil},
		{"rules with a problem", slidegate.Rules{}, bad, nil},
		{"rules the guard refuses", limitRules(-1), nil, nil},
		{"last good file missing", slidegate.Rules{}, errUnreachable, []Option{WithLastGood(filepath.Join(t.TempDir(), "last.json"))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGuard(t)
			src := newFakeSource(tc.rules, tc.err)
			f, err := Follow(g, src, tc.opts...)
			if f != nil || err == nil {
				t.Fatalf("Follow: %v, %v; want an error", f, err)
			}
			if tc.err != nil && !errors.Is(err, tc.err) {
				t.Fatalf("Follow: %v, want %v", err, tc.err)
			}
			if n := src.closeCount(); n != 1 {
				t.Fatalf("the source closed %d times, want once", n)
			}
			if got := limitsOf(g); len(got) != 0 {
				t.Fatalf("limits %v in force, want none", got)
			}
		})
	}
}

// Follow starts from the last good rules when its source has none, and
// follows the source until it has.
func TestFollowStartsFromTheLastGoodRules(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules slidegate.Rules
		err   error
	}{
		{"unreachable", slidegate.Rules{}, errUnreachable},
		{"rules with a problem", slidegate.Rules{}, &slidegate.RulesError{Problems: []slidegate.Problem{{Reason: "bad"}}}},
		{"rules the guard refuses", limitRules(-1), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lastGood := filepath.Join(t.TempDir(), "last")
			// An earlier run wrote it.
			first := newFakeSource(limitRules(7, 8), nil)
			f, err := Follow(newGuard(t), first, WithLastGood(lastGood))
			if err != nil {
				t.Fatal(err)
			}
			f.Close()

			g := newGuard(t)
			src := newFakeSource(tc.rules, tc.err)
			_, log, next := following(t, g, src, WithLastGood(lastGood), WithClock(clock.NewManual(0)))
			if got := limitsOf(g); !sameLimits(got, 7, 8) {
				t.Fatalf("limits %v at start, want the last good [7 8]", got)
			}
			line := lineWith(log.String(), "last good rules are put in force")
			if !strings.Contains(line, "level=WARN") || !strings.Contains(line, "source=fake://rules") || !strings.Contains(line, "err=") {
				t.Errorf("the start logged as %q, want a Warn naming the source and its error:\n%s", line, log.String())
			}
			src.set(tc.rules, tc.err) // the same: nothing new
			waitReads(t, src, 2)
			src.set(limitRules(9), nil)
			if err := next(); err != nil {
				t.Fatal(err)
			}
			if got := limitsOf(g); !sameLimits(got, 9) {
				t.Fatalf("limits %v once the source has rules, want [9]", got)
			}
		})
	}
}

// A last good file that cannot be read is logged and ignored: Follow
// returns the source's error.
func TestFollowIgnoresACorruptLastGoodFile(t *testing.T) {
	for _, content := range []string{`{"flow": [{"resource": "a", "limit": 1`, `{"flow": [{"resource": "a", "limit": -1}]}`, ""} {
		lastGood := filepath.Join(t.TempDir(), "last.json")
		write(t, lastGood, content)
		var log syncbuf.Buffer
		g := newGuard(t)
		_, err := Follow(g, newFakeSource(slidegate.Rules{}, errUnreachable), WithLastGood(lastGood),
			WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
		if !errors.Is(err, errUnreachable) {
			t.Fatalf("last good %q: Follow returned %v, want the source's error", content, err)
		}
		if line := lineWith(log.String(), "last good rules file ignored"); !strings.Contains(line, "level=WARN") || !strings.Contains(line, "last_good=") {
			t.Errorf("last good %q logged as %q, want a Warn naming the file:\n%s", content, line, log.String())
		}
		if got := limitsOf(g); len(got) != 0 {
			t.Fatalf("limits %v in force, want none", got)
		}
	}
}

// The last good file holds each set of rules put in force, whole and
// private, and never rules that were refused.
func TestFollowWritesTheLastGoodRulesAfterEachReload(t *testing.T) {
	dir := t.TempDir()
	lastGood := filepath.Join(dir, "last.json")
	src := newFakeSource(limitRules(1), nil)
	_, _, next := following(t, newGuard(t), src, WithLastGood(lastGood))
	check := func(want ...int64) {
		t.Helper()
		r, err := Load(lastGood)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, f := range r.Flow {
			got = append(got, f.Limit)
		}
		if !sameLimits(got, want...) {
			t.Fatalf("last good limits %v, want %v", got, want)
		}
		fi, err := os.Stat(lastGood)
		if err != nil {
			t.Fatal(err)
		}
		if mode := fi.Mode().Perm(); mode != 0o600 {
			t.Fatalf("last good file mode %v, want 0600", mode)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 {
			t.Fatalf("%d files beside the last good file's temporary ones, want none: %v", len(entries)-1, entries)
		}
	}
	check(1)
	src.set(limitRules(2, 3), nil)
	if err := next(); err != nil {
		t.Fatal(err)
	}
	check(2, 3)
	src.set(limitRules(-1), nil)
	if err := next(); err == nil {
		t.Fatal("bad rules were put in force")
	}
	check(2, 3)
}

// A last good file that cannot be written is logged, and the rules are in
// force all the same.
func TestFollowLogsALastGoodFileItCannotWrite(t *testing.T) {
	lastGood := filepath.Join(t.TempDir(), "missing-dir", "last.json")
	g := newGuard(t)
	src := newFakeSource(limitRules(1), nil)
	_, log, next := following(t, g, src, WithLastGood(lastGood))
	src.set(limitRules(2), nil)
	if err := next(); err != nil {
		t.Fatal(err)
	}
	if got := limitsOf(g); !sameLimits(got, 2) {
		t.Fatalf("limits %v, want [2]", got)
	}
	if n := strings.Count(log.String(), "level=WARN msg=\"slidegate: last good rules not saved"); n != 2 {
		t.Errorf("%d failed writes logged, want 2:\n%s", n, log.String())
	}
}

func TestFollowRefusesBadArguments(t *testing.T) {
	for _, tc := range []struct {
		name string
		g    *slidegate.Guard
		src  *fakeSource
		opt  Option
		want string
	}{
		{"nil guard", nil, newFakeSource(limitRules(1), nil), nil, "guard = nil"},
		{"empty last good", newGuard(t), newFakeSource(limitRules(1), nil), WithLastGood(""), `last good = ""`},
		{"nil logger", newGuard(t), newFakeSource(limitRules(1), nil), WithLogger(nil), "logger = nil"},
	} {
		f, err := Follow(tc.g, tc.src, tc.opt)
		if f != nil || !errors.Is(err, errInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Follow: %v, %v; want an errInvalidConfig naming %q", tc.name, f, err, tc.want)
		}
		if n := tc.src.closeCount(); n != 1 {
			t.Errorf("%s: the source closed %d times, want once", tc.name, n)
		}
	}
	if f, err := Follow(newGuard(t), nil); f != nil || !errors.Is(err, errInvalidConfig) || !strings.Contains(err.Error(), "source = nil") {
		t.Errorf("Follow(nil source): %v, %v; want an errInvalidConfig naming the source", f, err)
	}
}

// Watch with a last good file starts from it while the rules file is
// missing, and follows the file once it is written.
func TestWatchStartsFromTheLastGoodRulesWhenTheFileIsMissing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	lastGood := filepath.Join(t.TempDir(), "last.json")
	if err := writeLastGood(lastGood, limitRules(4)); err != nil {
		t.Fatal(err)
	}
	g := newGuard(t)
	_, next := reloadsOf(t, g, path, WithLastGood(lastGood))
	if got := limitsOf(g); !sameLimits(got, 4) {
		t.Fatalf("limits %v at start, want the last good [4]", got)
	}
	tmp := filepath.Join(dir, "rules.yaml.tmp")
	write(t, tmp, rulesWithLimit("6"))
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if limits, err := next(); err != nil || !sameLimits(limits, 6) {
		t.Fatalf("reload %v with limits %v, want nil and [6]", err, limits)
	}
	r, err := parse(lastGood, mustRead(t, lastGood), true)
	if err != nil || len(r.Flow) != 1 || r.Flow[0].Limit != 6 {
		t.Fatalf("last good %v, %v; want the file's [6]", r, err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
