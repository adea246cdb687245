package rulefile

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/config"
)

// An Option customises [Watch], [File] and [Follow]. Each takes the
// options that concern it and ignores the others. So one list serves a
// source and the Follow that applies it. File takes [WithSettle],
// [WithClock] and [WithLogger]. Follow takes WithLogger, [OnReload],
// WithClock and [WithLastGood]. Watch takes them all.
type Option func(*settings)

// settings are what the options set; each field's zero value means unset.
type settings struct {
	log      *slog.Logger
	onReload func(error)
	clock    clock.Clock
	settle   time.Duration
	lastGood string
	err      error // the first bad option
}

// Defaults of the waits.
const (
	defaultSettle   = 50 * time.Millisecond // WithSettle
	defaultCutShort = time.Second           // a YAML file that looks cut short
	retryFirst      = time.Second           // the first wait before reading an unreadable source again
	retryMost       = 30 * time.Second      // the longest, reached by doubling
)

// newSettings applies opts over the defaults, and returns the first bad
// option's error.
func newSettings(opts []Option) (*settings, error) {
	s := &settings{log: slog.Default(), clock: clock.System, settle: defaultSettle}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	return s, s.err
}

// errInvalidConfig is wrapped by the error [Watch], [File] and [Follow]
// return for a bad option or argument. The message names the option and
// its value.
var errInvalidConfig = config.Sentinel("rulefile")

// bad records a bad option, unless one was found before.
func (s *settings) bad(format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf("%w: "+format, append([]any{errInvalidConfig}, args...)...)
	}
}

// WithLogger makes the follower and the file source log through l. Rules
// put in force are logged at Info, naming the source. Rules refused are
// logged at Warn, with the [*slidegate.RulesError] that lists every
// problem. A source that cannot be read is logged once at Warn, and at
// Info when it can be read again. By default they log through
// [slog.Default]. A nil l is an error.
func WithLogger(l *slog.Logger) Option {
	return func(s *settings) {
		if l == nil {
			s.bad("logger = nil: give a logger, or leave the option out for slog.Default()")
			return
		}
		s.log = l
	}
}

// OnReload registers f to be called after each reload, but not after the
// first load. f is given nil, or the reason the rules were refused. f is
// also called once when the source becomes unreadable, with the error that
// reading it returned. A change that leaves the source's rules as they
// were last judged makes no reload and no call. A source readable again
// after an outage makes one, even with the same rules. f is called on the
// follower's goroutine. The follower waits for it, and f must not call
// [Follower.Close].
func OnReload(f func(err error)) Option {
	return func(s *settings) { s.onReload = f }
}

// WithSettle sets how far apart the two reads of a changed file are
// taken; they must agree. It also sets how long after the first change the
// first read is. The default is 50 ms. A d that is not positive is an
// error.
//
// A writer may pause longer than this between its writes, without writing
// a new file and renaming it over the old. Then a part of its file may be
// judged alone (see the package documentation). A longer settle time
// narrows that, at the cost of a later reload.
func WithSettle(d time.Duration) Option {
	return func(s *settings) {
		if d <= 0 {
			s.bad("settle = %v: must be positive", d)
			return
		}
		s.settle = d
	}
}

// WithClock makes two kinds of waits run on c: the file source's settle
// waits, and the follower's waits before reading an unreadable source
// again. Tests and simulations advance c by hand ([clock.Manual]). By
// default they wait on real timers. A nil c is an error.
func WithClock(c clock.Clock) Option {
	return func(s *settings) {
		if c == nil {
			s.bad("clock = nil: give a clock, or leave the option out for real timers")
			return
		}
		s.clock = c
	}
}

// WithLastGood makes the follower keep the last good rules in the file at
// path. After each set of rules it puts in force from its source, it
// writes them there as JSON. It writes a new file in path's directory,
// syncs it to disk and renames it over path. So path always holds a whole
// set. The file has mode 0600.
//
// When Follow starts and the source cannot be read or its rules have a
// problem, the rules in that file are put in force instead. Follow then
// goes on following the source. A failure to write the file is logged and
// changes nothing else. A file that cannot be read back, or has a problem,
// is logged and ignored. An empty path is an error.
func WithLastGood(path string) Option {
	return func(s *settings) {
		if path == "" {
			s.bad("last good = \"\": give the path of a file to keep the last good rules in")
			return
		}
		s.lastGood = path
	}
}
