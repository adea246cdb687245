package slidegate

import (
	"errors"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
)

// A throttle used on its own, outside a guard, refuses a Wait with a
// *flow.BlockError: it must match ErrBlocked as a guard's refusal does, so
// that one errors.Is tells every refusal of the library apart.
func TestAThrottleWaitRefusedOutsideAGuardMatchesErrBlocked(t *testing.T) {
	clk := clock.NewManual(0)
	th, err := flow.NewThrottle(flow.ThrottleSettings{Limit: 1, Interval: time.Second, MaxWait: 0, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := th.Wait(bg, ""); err != nil {
		t.Fatalf("the first Wait: %v, want nil", err)
	}
	err = th.Wait(bg, "") // the next place is a second away; no wait allowed
	var be *flow.BlockError
	if !errors.As(err, &be) || be.Reason != flow.WaitTooLong {
		t.Fatalf("the second Wait: %v, want a *flow.BlockError of flow.WaitTooLong", err)
	}
	if !errors.Is(err, flow.ErrBlocked) {
		t.Errorf("errors.Is(%v, flow.ErrBlocked) = false, want true", err)
	}
}

// The same for a per-key throttle.
func TestAPerKeyThrottleWaitRefusedOutsideAGuardMatchesErrBlocked(t *testing.T) {
	clk := clock.NewManual(0)
	th, err := flow.NewThrottle(flow.ThrottleSettings{Limit: 1, Interval: time.Second, MaxWait: 0, PerKey: true, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := th.Wait(bg, "k"); err != nil {
		t.Fatalf("the first Wait: %v, want nil", err)
	}
	err = th.Wait(bg, "k")
	var be *flow.BlockError
	if !errors.As(err, &be) || be.Reason != flow.WaitTooLong {
		t.Fatalf("the second Wait: %v, want a *flow.BlockError of flow.WaitTooLong", err)
	}
	if !errors.Is(err, flow.ErrBlocked) {
		t.Errorf("errors.Is(%v, flow.ErrBlocked) = false, want true", err)
	}
}
