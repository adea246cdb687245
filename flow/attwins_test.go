package flow

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// The twins added for the rule decide at the time they are given, and
// their plain forms at the limiter's clock.
func TestTheAtTwinsDecideAtTheTimeGiven(t *testing.T) {
	c := clock.NewManual(0)
	hour, sec := int64(time.Hour), int64(time.Second)

	q, err := NewKeyedQPS(KeyedQPSSettings{Windows: []KeyWindow{{Limit: 1, Interval: time.Second}}, Clock: c})
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := q.AllowAt(hour, "k"); !d.Allowed {
		t.Fatalf("KeyedQPS.AllowAt(1h) of a new key: %+v", d)
	}
	if d, j := q.AllowAt(hour, "k"); d.Allowed || j != 0 || d.RetryAfter <= 0 {
		t.Fatalf("KeyedQPS.AllowAt(1h) again: %+v, window %d, want refused by window 0", d, j)
	}
	if d, _ := q.AllowAt(hour+2*sec, "k"); !d.Allowed {
		t.Fatalf("KeyedQPS.AllowAt(1h+2s): %+v", d)
	}
	c.Set(hour + 2*sec)
	if got, want := len(q.topAt(c.Now(), 10, false)), len(q.topAt(hour+2*sec, 10, false)); got != want || got != 1 {
		t.Fatalf("Top shows %d keys, TopAt at the clock's time %d, want 1", got, want)
	}

	th := mustKeyedThrottle(t, 1, time.Second, 0, nil, 0, c)
	if d := th.AllowAt(0, "k"); !d.Allowed {
		t.Fatalf("KeyedThrottle.AllowAt(0): %+v", d)
	}
	if d := th.AllowAt(0, "k"); d.Reason != RateLimited || d.RetryAfter != time.Second {
		t.Fatalf("KeyedThrottle.AllowAt(0) again: %+v, want rate limited, retry after 1s", d)
	}
	if err := th.WaitAt(context.Background(), sec, "k"); err != nil {
		t.Fatalf("KeyedThrottle.WaitAt(1s): %v", err)
	}
	if err := th.WaitAt(context.Background(), sec, "k"); err == nil {
		t.Fatal("KeyedThrottle.WaitAt(1s) again was let through with no wait allowed")
	}

	cpu := new(cpuAt)
	cpu.set(1)
	s, err := NewShedder(ShedderSettings{CPU: cpu.read, Clock: c})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.stateAt(0).Limit; got != math.MaxInt64 {
		t.Fatalf("the bound before any request completed = %d, want none", got)
	}
	for range 10 {
		var p Permit
		s.AcquireAt(0, &p, "")
		p.DoneAt(int64(time.Millisecond), Succeeded)
	}
	if st := s.stateAt(sec); st.Limit == math.MaxInt64 || !st.Shedding {
		t.Fatalf("the shedder's state at 1s = %+v: want a bound learnt, and shedding at 100%% CPU", st)
	}
}
