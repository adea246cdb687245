package rulefile

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// An Option customises [Watch], [File] and [Follow]. Each takes the
// options that concern it and ignores the others, so that one list serves
// a source and the Follow that applies it. File takes [WithSettle],
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

// ErrInvalidConfig is wrapped by the error Watch, File and Follow return for
// a bad option or argument. The message names the option and its value.
var ErrInvalidConfig = errors.New("rulefile: invalid configuration")

// bad records a bad option, unless one was found before.
func (s *settings) bad(format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
}

// WithLogger makes the follower, and the file source, log through l: rules
// put in force at Info, naming the source; rules refused at Warn with the
// *slidegate.RulesError that lists every problem; a source that cannot be
// read at Warn once, and at Info when it can be read again. By default they
// log through slog.Default(). A nil l is an error.
func WithLogger(l *slog.Logger) Option {
	return func(s *settings) {
		if l == nil {
			s.bad("logger = nil: give a logger, or leave the option out for slog.Default()")
			return
		}
		s.log = l
	}
}

// OnReload registers f to be called after each reload (not the first
// load), with nil or the reason the rules were refused, and once when the
// source becomes unreadable, with the error that reading it returned. A
// change that leaves the source's rules as they were last judged makes no
// reload and no call; a source readable again after an outage makes one,
// even with the same rules. f is called on the follower's goroutine: the
// follower waits for it, and f must not call Close.
func OnReload(f func(err error)) Option {
	return func(s *settings) { s.onReload = f }
}

// WithSettle sets how long apart the two reads of a changed file that must
// agree are taken, and how long after the first change the first read is:
// 50 ms by default. A writer that pauses longer than this between its
// writes, and does not write a new file and rename it over the old, may
// have a part of its file judged alone (see the package documentation); a
// longer settle time narrows that at the cost of a later reload. A d that
// is not positive is an error.
func WithSettle(d time.Duration) Option {
	return func(s *settings) {
		if d <= 0 {
			s.bad("settle = %v: must be positive", d)
			return
		}
		s.settle = d
	}
}

// WithClock makes the file source's settle waits and the follower's waits
// before reading an unreadable source again run on c, which tests and
// simulations advance by hand (clock.Manual); by default they wait on real
// timers. A nil c is an error.
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
// path: after each set of rules it puts in force from its source, it writes
// them there as JSON (a new file in path's directory, synced to disk, then
// renamed over path, with mode 0600, so that path always holds a whole
// set). When Follow starts and the source cannot be read or its rules have
// a problem, the rules in that file are put in force instead, and Follow
// goes on following the source. A failure to write the file is logged and
// changes nothing else; a file that cannot be read back or has a problem
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
