package dashboard

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/bounds"
	"github.com/slidegate/slidegate/internal/flowstate"
)

// newBudget returns a retry budget of ratio retries per request, no floor,
// over one second, on clk.
func newBudget(t *testing.T, ratio float64, clk clock.Clock) *flow.RetryBudget {
	t.Helper()
	b, err := flow.NewRetryBudget(flow.RetryBudgetSettings{Ratio: ratio, MinPerSecond: 0, Interval: time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// spend counts requests original requests on b, then asks for retries
// retries of failed attempts and one of a breaker's probe, and returns
// what it counted: the retries allowed and blocked, and the probe not
// retried.
func spend(b *flow.RetryBudget, requests, retries int) flowstate.RetryStats {
	var st flowstate.RetryStats
	for range requests {
		b.Request()
		st.Requests++
	}
	for range retries {
		if _, ok := b.Retry(flow.AttemptFailed); ok {
			st.Retries++
		} else {
			st.Blocked++
		}
	}
	if _, ok := b.Retry(flow.AttemptProbe); !ok {
		st.NotRetried++
	}
	return st
}

func retryOf(name string, st flowstate.RetryStats) retryJSON {
	return retryJSON{Budget: name, Requests: st.Requests, Retries: st.Retries, Blocked: st.Blocked, NotRetried: st.NotRetried}
}

func TestSnapshotsAndEventsCarryTheRetryBudgets(t *testing.T) {
	// The orders budget runs on the guard's clock; the payments budget on a
	// clock of its own, an hour behind the guard's and standing still: the
	// dashboard must read each on its own clock, or it would find the
	// payments budget's interval empty.
	clk := clock.NewManual(int64(time.Hour))
	g, err := slidegate.New(slidegate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	clkPayments := clock.NewManual(0)
	orders := newBudget(t, 0.5, clk)
	payments := newBudget(t, 0.2, clkPayments)
	d, err := New(g, WithInterval(0), WithRetryBudget("orders", orders), WithRetryBudget("payments", payments))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	f := &fixture{clk: clk, g: g, d: d}
	f.step(time.Second)

	srv := newServer(t, f.d)
	s := openStream(t, srv.URL+"/api/events")
	var first snapshotJSON
	s.next(t, "snapshot", &first)
	want := []retryJSON{{Budget: "orders"}, {Budget: "payments"}}
	if !slices.Equal(first.Retries, want) {
		t.Errorf("the first snapshot's retry budgets:\n%+v, want\n%+v", first.Retries, want)
	}

	stOrders := spend(orders, 10, 8)
	stPayments := spend(payments, 20, 6)
	if stOrders.Blocked == 0 || stPayments.Blocked == 0 || stOrders.Retries == 0 || stPayments.Retries == 0 {
		t.Fatalf("the budgets allowed %+v and %+v: want some retries allowed and some blocked in each", stOrders, stPayments)
	}
	f.step(100 * time.Millisecond) // within the budgets' interval
	want = []retryJSON{retryOf("orders", stOrders), retryOf("payments", stPayments)}
	var ev eventJSON
	s.next(t, "sample", &ev)
	if !slices.Equal(ev.Retries, want) {
		t.Errorf("the event's retry budgets:\n%+v, want\n%+v", ev.Retries, want)
	}
	if snap := f.snapshot(t); !slices.Equal(snap.Retries, want) {
		t.Errorf("the snapshot's retry budgets:\n%+v, want\n%+v", snap.Retries, want)
	}

	// Once the orders budget's interval has passed, its requests and
	// retries are gone, its totals stay; the payments budget's clock has
	// not moved.
	f.step(2 * time.Second)
	want[0].Requests, want[0].Retries = 0, 0
	s.next(t, "sample", &ev)
	if !slices.Equal(ev.Retries, want) {
		t.Errorf("the event's retry budgets after the interval:\n%+v, want\n%+v", ev.Retries, want)
	}

	// The field names, as the page reads them.
	o := objectAt(t, rawJSON(t, f.d, "/api/snapshot"), "retries", 1)
	fields := []string{"blocked", "budget", "not_retried", "requests", "retries"}
	if got := keys(t, "a retry budget", o); !slices.Equal(got, fields) {
		t.Errorf("a retry budget has the fields %q, want %q", got, fields)
	}
}

// Without retry budgets the list is empty, not null, in snapshots and
// events alike.
func TestNoRetryBudgetsIsAnEmptyList(t *testing.T) {
	f := newFixture(t, nil)
	f.step(time.Second)
	if o := objectAt(t, rawJSON(t, f.d, "/api/snapshot"), "retries"); o == nil || len(o.([]any)) != 0 {
		t.Errorf("a snapshot's retry budgets without any: %v, want []", o)
	}
	srv := newServer(t, f.d)
	s := openStream(t, srv.URL+"/api/events")
	var snap snapshotJSON
	s.next(t, "snapshot", &snap)
	f.step(time.Second)
	var ev eventJSON
	s.next(t, "sample", &ev)
	if ev.Retries == nil || len(ev.Retries) != 0 {
		t.Errorf("an event's retry budgets without any: %#v, want []", ev.Retries)
	}
}

// Bad budgets are errors naming the option and its value, and the bounds
// themselves are allowed: a name of MaxNameLength bytes, maxRetryBudgets
// budgets.
func TestWithRetryBudgetBoundsTheBudgets(t *testing.T) {
	clk := clock.NewManual(0)
	b := newBudget(t, 0.1, clk)
	many := func(n int) []Option {
		opts := make([]Option, n)
		for i := range opts {
			opts[i] = WithRetryBudget(fmt.Sprintf("budget-%03d", i), b)
		}
		return opts
	}
	longest := strings.Repeat("n", bounds.MaxNameLength)
	for _, c := range []struct {
		what string
		opts []Option
		want string // in the error; "" for none
	}{
		{"empty name", []Option{WithRetryBudget("", b)}, `retry budget name = ""`},
		{"name too long", []Option{WithRetryBudget(longest+"n", b)}, fmt.Sprintf("%d bytes, at most %d", bounds.MaxNameLength+1, bounds.MaxNameLength)},
		{"nil budget", []Option{WithRetryBudget("orders", nil)}, `retry budget "orders" = nil`},
		{"name twice", []Option{WithRetryBudget("orders", b), WithRetryBudget("orders", newBudget(t, 0.1, clk))}, `retry budget name = "orders": given twice`},
		{"one too many", many(maxRetryBudgets + 1), fmt.Sprintf(`retry budget "budget-%03d": one more than the %d`, maxRetryBudgets, maxRetryBudgets)},
		{"longest name", []Option{WithRetryBudget(longest, b)}, ""},
		{"as many as allowed", many(maxRetryBudgets), ""},
	} {
		g, err := slidegate.New(slidegate.WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		d, err := New(g, append([]Option{WithInterval(0)}, c.opts...)...)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", c.what, err)
				continue
			}
			if got, want := len(d.budgets), len(c.opts); got != want {
				t.Errorf("%s: the dashboard keeps %d budgets, want %d", c.what, got, want)
			}
			d.Close()
			continue
		}
		if !errors.Is(err, errInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want errInvalidConfig saying %q", c.what, err, c.want)
		}
		if d != nil {
			d.Close()
		}
	}
}

// Names the page shows as text are sent as JSON text, whatever their
// bytes: markup, quotes, control characters and invalid UTF-8 encode, and
// the frame stays valid.
func TestRetryBudgetNamesAreText(t *testing.T) {
	clk := clock.NewManual(int64(time.Hour))
	g, err := slidegate.New(slidegate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	names := []string{`<img src=x onerror="alert(1)">`, "line\nbreak\x00\"quote\"", "bad \xff utf-8"}
	var opts []Option
	for _, n := range names {
		opts = append(opts, WithRetryBudget(n, newBudget(t, 0.1, clk)))
	}
	d, err := New(g, append([]Option{WithInterval(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	clk.Advance(time.Second)
	d.Sample()
	got := objectAt(t, rawJSON(t, d, "/api/snapshot"), "retries").([]any)
	want := []string{names[0], names[1], "bad \uFFFD utf-8"}
	if len(got) != len(want) {
		t.Fatalf("%d retry budgets, want %d", len(got), len(want))
	}
	for i, w := range want {
		if n := got[i].(map[string]any)["budget"]; n != w {
			t.Errorf("budget %d is named %q, want %q", i, n, w)
		}
	}
}
