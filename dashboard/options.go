package dashboard

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"time"

	settingerr "github.com/slidegate/slidegate/internal/config"

	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/bounds"
)

// Defaults of the options, stated in their docs.
const (
	defaultInterval       = time.Second // WithInterval
	defaultHistory        = 300         // WithHistory: five minutes at one sample a second
	defaultMaxStreams     = 64          // WithMaxStreams
	defaultMaxStreamAge   = time.Minute // WithMaxStreamAge
	defaultSnapshotPoints = 1 << 15     // WithSnapshotPoints: the whole default history of 109 resources
	defaultTopKeys        = 10          // WithTopKeys
	maxTopKeys            = 100         // WithTopKeys' largest n
)

// An Option customises a Dashboard.
type Option func(*config)

type config struct {
	interval       time.Duration
	history        int
	maxStreams     int
	maxStreamAge   time.Duration
	snapshotPoints int
	topKeys        int
	token          *[sha256.Size]byte // nil: rule editing disabled
	budgets        []namedBudget      // WithRetryBudget, in the order given
	err            error              // the first bad option
}

// errInvalidConfig is wrapped by the error New returns for a bad option. The
// message names the option and its value.
var errInvalidConfig = settingerr.Sentinel("dashboard")

// bad records a bad option, unless one was found before.
func (c *config) bad(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: "+format, append([]any{errInvalidConfig}, args...)...)
	}
}

// WithInterval sets how often the dashboard samples the guard (default
// one second). A d of zero starts no sampler goroutine: the
// dashboard then samples only when Sample is called, for tests and custom
// schedules. A negative d is an error.
func WithInterval(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.bad("interval = %v: must not be negative (0 samples only on Sample)", d)
			return
		}
		c.interval = d
	}
}

// WithHistory sets how many samples the dashboard keeps for each resource:
// at least 1, 300 by default (five minutes at one sample a second). The
// oldest are dropped first. Each sample of a resource takes 64 bytes, so
// the default costs about 19 KiB a resource.
func WithHistory(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.bad("history = %d: must be at least 1", n)
			return
		}
		c.history = n
	}
}

// WithMaxStreams sets how many event streams (api/events) the dashboard
// serves at once: at least 1, 64 by default. A request for one more is
// answered 503 Service Unavailable with a Retry-After header, and the
// page tries again later. A stream costs the dashboard no copy of what it
// sends (see the package documentation's memory bound), but each is a
// connection, a goroutine and the time to write every sample. A stream
// holds its slot for at most its age (WithMaxStreamAge) and a write
// timeout, whether its client reads or not.
func WithMaxStreams(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.bad("max streams = %d: must be at least 1", n)
			return
		}
		c.maxStreams = n
	}
}

// WithMaxStreamAge sets how long an event stream lasts (default a
// minute), at least a second. Then the dashboard
// ends it. The page comes back a second later and goes on from the last
// event it got (Last-Event-ID): it misses no sample, and is sent no new
// snapshot while the events since are kept (those of the last 8 samples).
//
// A client that stops reading holds its stream's slot no longer than that
// and the write timeout (5 s): the dashboard cannot tell it from one that
// reads until the connection's buffers are full, which can take far
// longer. A client that reads too slowly to take an event within the write
// timeout is dropped then.
func WithMaxStreamAge(d time.Duration) Option {
	return func(c *config) {
		if d < time.Second {
			c.bad("max stream age = %v: must be at least 1s", d)
			return
		}
		c.maxStreamAge = d
	}
}

// WithSnapshotPoints bounds the points of history a snapshot carries, all
// resources together (default 32,768: the whole default history of 109
// resources). When the histories
// hold more, each resource's history in a snapshot is cut to its newest
// n/resources points, at least one, and marked partial. GET api/history
// serves it whole, and the page asks for it when it draws the chart. So a
// snapshot's size depends on n and the number of resources, not on
// [WithHistory]. An n of 0 keeps each resource's newest point alone; a
// negative n is an error.
func WithSnapshotPoints(n int) Option {
	return func(c *config) {
		if n < 0 {
			c.bad("snapshot points = %d: must not be negative", n)
			return
		}
		c.snapshotPoints = n
	}
}

// WithRuleEditing lets PUT api/rules replace the guard's rules, for requests
// that carry "Authorization: Bearer " followed by token; the page then shows
// a rules editor. Editing is disabled unless this option is given; an empty
// token is an error.
//
// The token travels in a header, so a page of another origin cannot send it
// without the browser's permission (CORS), and the dashboard grants none.
// Serve the dashboard over HTTPS if the token crosses a network.
func WithRuleEditing(token string) Option {
	return func(c *config) {
		if token == "" {
			c.bad("rule editing token = \"\": an empty token would let anyone edit; leave the option out to disable editing")
			return
		}
		sum := sha256.Sum256([]byte(token))
		c.token = &sum
	}
}

// WithTopKeys sets how many keys the dashboard shows of each resource with
// per-key rules (default 10). It shows the n keys with the
// most requests allowed, and the n with the most blocked, among those the
// guard tracks ([slidegate.Guard.TopKeys]). An n of 0 shows none and
// reads none; an n below 0 or above 100 is an error. Every
// sample carries these keys: at most 2·n keys of at most 64 bytes, for
// each of at most 16 resources.
func WithTopKeys(n int) Option {
	return func(c *config) {
		if n < 0 || n > maxTopKeys {
			c.bad("top keys = %d: must be between 0 (no keys) and %d", n, maxTopKeys)
			return
		}
		c.topKeys = n
	}
}

// maxRetryBudgets is the most retry budgets a dashboard shows
// (WithRetryBudget).
const maxRetryBudgets = 100

// namedBudget is a retry budget and the name the dashboard shows it by.
type namedBudget struct {
	name string
	b    *flow.RetryBudget
}

// WithRetryBudget makes the dashboard show what the retry budget b has
// counted (flow.RetryBudget.Stats), under name: the requests and the
// retries of its interval, the retries it refused for want of budget and
// the failed attempts it did not retry. Give it the budget of a client's
// httpguard.WithRetry or grpcguard.WithRetry; budgets are shown in the
// order given. The names come from the program, not from the network, but
// are bounded all the same: an empty name, one longer than
// 256 bytes, a name given twice, a nil b, and more than
// 100 budgets are errors. Each budget adds its name and some 80 bytes to
// every event and snapshot.
func WithRetryBudget(name string, b *flow.RetryBudget) Option {
	return func(c *config) {
		switch {
		case name == "":
			c.bad("retry budget name = \"\": must not be empty")
		case len(name) > bounds.MaxNameLength:
			c.bad("retry budget name = %.32q...: %d bytes, at most %d", name, len(name), bounds.MaxNameLength)
		case b == nil:
			c.bad("retry budget %q = nil: must be a budget", name)
		case len(c.budgets) >= maxRetryBudgets:
			c.bad("retry budget %q: one more than the %d a dashboard shows", name, maxRetryBudgets)
		case slices.ContainsFunc(c.budgets, func(nb namedBudget) bool { return nb.name == name }):
			c.bad("retry budget name = %q: given twice", name)
		default:
			c.budgets = append(c.budgets, namedBudget{name, b})
		}
	}
}
