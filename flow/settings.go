package flow

import (
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/flowlimits"
)

// What the settings of the limiters share. Each limiter has a settings
// struct of its own, which holds only what that limiter takes: a setting
// one limiter takes and another does not cannot be given to the other.
// Limits are taken as they are given, so that 0 allows nothing; every
// other zero field takes its default.

// clockOr returns c, or clock.System for nil.
func clockOr(c clock.Clock) clock.Clock {
	if c == nil {
		return clock.System
	}
	return c
}

// checkWarmUp checks a warm-up period and its cold factor, filling in the
// factor's default: a factor without a period would change nothing.
func checkWarmUp(period time.Duration, cold *float64) error {
	switch {
	case period < 0:
		return &configError{Pkg: "flow", Field: "warm_up", Value: period, Detail: "must be positive, or 0 for none"}
	case period == 0 && *cold != 0:
		return &configError{Pkg: "flow", Field: "cold_factor", Value: *cold, Detail: "applies only with a warm-up"}
	case period > 0 && *cold == 0:
		*cold = flowlimits.DefaultColdFactor
	}
	return nil
}
