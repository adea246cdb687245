package window

import (
	"sync"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/timegrid"
	"github.com/slidegate/slidegate/internal/windowhook"
)

// A configError is the error a constructor or a View method returns for
// a bad argument or [Option]. It matches
// [github.com/slidegate/slidegate.ErrInvalidConfig], and reads like this:
//
//	window: invalid configuration: buckets = 0: must be between 1 and 65536
//
// Field names what was wrong: "buckets", "interval", "view" (the duration
// given to View), "clock", or the option given to a type it does not apply
// to ("compact", "ignore_current_bucket", "totals", "cached_sums",
// "events"). "interval" is also the field when the interval does not
// divide into the buckets, or into buckets of at least 1 µs.
type configError = config.Error

// options are the settings shared by the constructors in this package.
type options struct {
	clock         clock.Clock
	ignoreCurrent bool
	compact       bool
	events        *layout // nil: every event
	totals        bool
	cached        bool
	bad           *configError // the first option found bad as it was applied
}

// An Option customises a [Counter], [Histogram], [RollingWindow] or
// [Sketch]. An Option that does not apply to the type being made is an
// error, not ignored. A nil Option is no option.
type Option func(*options)

// WithClock makes the structure read time from c instead of
// [clock.System]. Tests and simulations pass a [*clock.Manual]. A nil c is
// an error.
func WithClock(c clock.Clock) Option {
	return func(o *options) {
		if c == nil && o.bad == nil {
			o.bad = &configError{Pkg: "window", Field: "clock", Value: c, Detail: "must not be nil"}
		}
		o.clock = c
	}
}

// WithEvents makes a [Counter] record only the events given.
// The others are not recorded ([Counter.AddAt] reports false) and read 0.
// Each event recorded costs 8 bytes per bucket. So a Counter that needs few
// events, such as one per resource or per breaker, takes a fraction of the
// memory. The events must be Events, each given once, at least one.
func WithEvents(events ...Event) Option {
	ev := append([]Event(nil), events...)
	detail := checkEvents(ev)
	var l *layout // made once, shared by every Counter the Option makes
	if detail == "" {
		l = newLayout(ev)
	}
	return func(o *options) {
		if detail != "" {
			if o.bad == nil {
				o.bad = &configError{Pkg: "window", Field: "events", Value: ev, Detail: detail}
			}
			return
		}
		o.events = l
	}
}

// checkEvents says what is wrong with a set of events for WithEvents, or
// returns "".
func checkEvents(ev []Event) string {
	if len(ev) == 0 {
		return "must name at least one event"
	}
	var seen [numEvents]bool
	for _, e := range ev {
		switch {
		case e >= numEvents:
			return e.String() + " is not an event"
		case seen[e]:
			return e.String() + " is given twice"
		}
		seen[e] = true
	}
	return ""
}

// The types options are given to, for buildOptions.
const (
	forCounter       = "a Counter"
	forHistogram     = "a Histogram"
	forRollingWindow = "a RollingWindow"
	forSketch        = "a Sketch"
)

// building holds the options being built, reused: an Option is called
// through its function value, so options given to it are on the heap, and
// one per constructor would be an allocation per Counter or Sketch made. An
// Option keeps no pointer to the options it sets.
var building = sync.Pool{New: func() any { return new(options) }}

// buildOptions applies opts for the type named by forType and returns the
// first bad option's error.
func buildOptions(opts []Option, forType string) (options, error) {
	p := building.Get().(*options)
	*p = options{clock: clock.System}
	for _, opt := range opts {
		if opt != nil {
			opt(p)
		}
	}
	o := *p
	*p = options{} // keeps no clock or layout alive
	building.Put(p)
	switch {
	case o.bad != nil:
		return o, o.bad
	case o.compact && forType != forHistogram:
		return o, &configError{Pkg: "window", Field: "compact", Value: true, Detail: "applies to a Histogram, not to " + forType}
	case o.totals && forType != forCounter:
		return o, &configError{Pkg: "window", Field: "totals", Value: true, Detail: "applies to a Counter, not to " + forType}
	case o.cached && forType != forCounter:
		return o, &configError{Pkg: "window", Field: "cached_sums", Value: true, Detail: "applies to a Counter, not to " + forType}
	case o.events != nil && forType != forCounter:
		return o, &configError{Pkg: "window", Field: "events", Value: o.events.events, Detail: "applies to a Counter, not to " + forType}
	case o.ignoreCurrent && forType != forRollingWindow:
		return o, &configError{Pkg: "window", Field: "ignore_current_bucket", Value: true, Detail: "applies to a RollingWindow, not to " + forType}
	}
	return o, nil
}

func init() {
	windowhook.CheckCounter = func(buckets int, interval time.Duration) error {
		_, err := splitInterval(buckets, interval)
		return err
	}
}

// splitInterval returns the width of each of buckets buckets spanning
// interval, or an error naming the bad argument.
func splitInterval(buckets int, interval time.Duration) (time.Duration, error) {
	if we := timegrid.CheckWindow(interval, buckets); we != nil {
		return 0, &configError{Pkg: "window", Field: we.Arg, Value: we.Value, Detail: we.Detail}
	}
	return interval / time.Duration(buckets), nil
}
