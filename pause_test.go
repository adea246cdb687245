package slidegate

import (
	"testing"
	"time"

	"github.com/slidegate/slidegate/breaker"
)

// The time a request waits on its client (Entry.Pause to Resume) is not
// the service's: the response time that statistics show and rules learn
// from leaves it out, so a client that sends its body slowly cannot open a
// slow-call breaker or bring an adaptive limit down.
func TestTimeWaitingOnTheClientIsNotResponseTime(t *testing.T) {
	slow := Duration(100 * time.Millisecond)
	one := int64(1)
	g, clk := newGuard(t, Rules{
		Flow:     []FlowRule{{Resource: "upload", Type: AdaptiveRule, Limit: 10, MinLimit: 10}},
		Breakers: []BreakerRule{{Resource: "upload", Strategy: SlowRatioBreaker, MaxRT: slow, Threshold: 0.5, MinRequests: &one}},
	})
	ms := int64(time.Millisecond)
	for i := range 20 {
		now := clk.Now()
		e, err := g.EnterAt(bg, now, "upload")
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		clk.Set(now + ms)
		e.Pause() // reading a body that trickles in for 3 s
		clk.Set(now + 3001*ms)
		e.Resume()
		if i%2 == 0 {
			e.Pause() // writing to a client that reads slowly, open at Exit
		}
		clk.Set(now + 3005*ms)
		e.ExitAt(clk.Now(), nil)
		e.Pause() // after Exit: nothing
		e.Resume()
	}
	st, _ := g.StatsAt(clk.Now(), "upload")
	if st.MaxRT > 5*time.Millisecond || st.Totals.Allowed != 20 {
		t.Fatalf("stats %+v: want 20 allowed, response times of at most 5 ms", st)
	}
	for _, b := range g.Breakers() {
		if b.State != breaker.Closed {
			t.Fatalf("breaker %+v: slow clients opened it", b)
		}
	}
	o := g.Overload()[0]
	if o.Baseline == 0 || float64(o.Baseline) > 1.05*float64(5*time.Millisecond) {
		t.Fatalf("adaptive baseline %v, want the 1 to 5 ms the service took", o.Baseline)
	}
}
