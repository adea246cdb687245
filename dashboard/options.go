package dashboard

import (
	"crypto/sha256"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// Defaults of the options.
const (
	DefaultInterval       = time.Second // WithInterval
	DefaultHistory        = 300         // WithHistory: five minutes at one sample a second
	DefaultMaxStreams     = 64          // WithMaxStreams
	DefaultSnapshotPoints = 1 << 15     // WithSnapshotPoints: the whole default history of 109 resources
)

// An Option customises a Dashboard.
type Option func(*config)

type config struct {
	interval       time.Duration
	history        int
	maxStreams     int
	snapshotPoints int
	clock          clock.Clock
	token          *[sha256.Size]byte // nil: rule editing disabled
}

// WithInterval sets how often the dashboard samples the guard (default
// DefaultInterval, one second). A d of zero or less starts no sampler
// goroutine: the dashboard then samples only when Sample is called, for tests
// and custom schedules.
func WithInterval(d time.Duration) Option {
	return func(c *config) { c.interval = d }
}

// WithHistory sets how many samples the dashboard keeps for each resource
// (default DefaultHistory); the oldest are dropped first. An n below 1 counts
// as 1. Each sample of a resource takes 64 bytes, so the default costs about
// 19 KiB a resource, about what the guard itself keeps for it
// (slidegate.ResourceBytes).
func WithHistory(n int) Option {
	return func(c *config) { c.history = max(n, 1) }
}

// WithMaxStreams sets how many event streams (api/events) the dashboard
// serves at once (default DefaultMaxStreams); a request for one more is
// answered 503 Service Unavailable with a Retry-After header, and the page
// tries again later. An n below 1 counts as 1. A stream costs the dashboard
// no copy of what it sends (see the package documentation's memory bound),
// but each is a connection, a goroutine and the time to write every sample.
func WithMaxStreams(n int) Option {
	return func(c *config) { c.maxStreams = max(n, 1) }
}

// WithSnapshotPoints bounds the points of history a snapshot carries, all
// resources together (default DefaultSnapshotPoints). When the resources'
// histories hold more, each resource's history in a snapshot is cut to its
// newest n/resources points (at least its newest one) and marked partial:
// GET api/history serves it whole, and the page asks for it when it draws
// the resource's chart. So a snapshot's size, and the time to encode it,
// depend on n and on the number of resources, but not on WithHistory. An n
// below 0 counts as 0: each resource's newest point alone.
func WithSnapshotPoints(n int) Option {
	return func(c *config) { c.snapshotPoints = max(n, 0) }
}

// WithClock makes the dashboard read time from c (default clock.System): the
// time of each sample, read once per sample, at which it reads the guard
// (Guard.ResourcesAt, BreakersAt, InboundStatsAt) and by which the rates
// divide. So c must be the clock the guard reads (slidegate.WithClock): at
// the readings of another clock, the guard's statistics of the last 10
// seconds, and its breakers' retry times, would describe the wrong moment.
// The sampler goroutine sleeps on c (clock.Sleep), so a clock.Manual drives
// it; for deterministic tests, combine a manual clock with WithInterval(0)
// and call Sample. A nil c counts as clock.System.
func WithClock(c clock.Clock) Option {
	return func(cfg *config) {
		if c == nil {
			c = clock.System
		}
		cfg.clock = c
	}
}

// WithRuleEditing lets PUT api/rules replace the guard's rules, for requests
// that carry "Authorization: Bearer " followed by token; the page then shows
// a rules editor. An empty token leaves editing disabled, as it is by default.
//
// The token travels in a header, so a page of another origin cannot send it
// without the browser's permission (CORS), and the dashboard grants none.
// Serve the dashboard over HTTPS if the token crosses a network.
func WithRuleEditing(token string) Option {
	return func(c *config) {
		if token == "" {
			c.token = nil
			return
		}
		sum := sha256.Sum256([]byte(token))
		c.token = &sum
	}
}
