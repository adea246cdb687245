package dashboard

import (
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
)

// A Dashboard is the web dashboard of one guard. It is an [http.Handler]
// that serves the page, its assets and its API. Its sampler reads the
// guard at a fixed interval and keeps a bounded history per resource.
//
// Only New makes a Dashboard: the zero value is not usable. (A zero
// Dashboard answers every request with 500 Internal Server Error, Sample
// does nothing and Close returns nil, rather than panicking.)
//
// A Dashboard is safe for concurrent use. Close it when it is no longer
// served, to stop its sampler goroutine and end its event streams.
type Dashboard struct {
	g              *slidegate.Guard
	clock          clock.Clock
	interval       time.Duration
	history        int
	snapshotPoints int
	maxStreams     int
	topKeys        int // keys of each list of a resource's top keys; 0: none
	token          *[32]byte
	budgets        []namedBudget // WithRetryBudget's, in the order given
	mux            *http.ServeMux
	writeTimeout   time.Duration // of each write to a client: writeTimeout but in tests
	streamAge      time.Duration // how long an event stream lasts: WithMaxStreamAge's
	instance       string        // tells this dashboard's event ids from another's (a restarted one's)

	// The wall time at which the clock read monoBase: the page shows wall
	// times, the rates divide monotonic ones.
	wallBase time.Time
	monoBase int64

	// sampling guards what the sampler keeps. The sampler holds it while it
	// reads the guard and encodes the sample's event; a reader while it
	// copies out values (a snapshot's, a resource's history), which it then
	// encodes without it. It is never held while writing to a client.
	sampling     sync.Mutex
	seq          uint64             // samples recorded
	observations uint64             // readings of the guard: samples and New's
	last         int64              // clock reading of the last sample (or of New)
	series       map[string]*series // by resource name
	inbound      *series
	breakers     []slidegate.BreakerStatus
	overload     []slidegate.OverloadStatus // the shed and adaptive rules, as of the last observation
	retries      []retryJSON                // the retry budgets, as of the last observation: made anew each time, never changed
	rules        slidegate.Rules
	rulesJSON    []byte           // rules as last sent, to send them again only when they change
	eventSeq     uint64           // the Seq of the latest of the guard's events seen
	timeline     []guardEventJSON // the latest of the guard's events seen, oldest first: made anew each time, never changed
	newEvents    []guardEventJSON // the guard's events the last observation saw first
	cluster      *clusterJSON     // the cluster's health, as of the last observation; nil without a cluster
	dropped      int64            // Guard.DroppedEvents, as of the last observation
	otherPrev    slidegate.Totals // OtherResource's totals while Resources hides it

	// encoding serializes the encoding of snapshots, so that clients that
	// ask for the same sample's snapshot at once wait for one encoding
	// instead of making one each. Taken before sampling.
	encoding sync.Mutex

	// mu guards what the clients read: the frames encoded so far, and the
	// streams. It is held only to read or swap pointers, never while
	// encoding or writing. Taken after sampling.
	mu       sync.Mutex
	head     uint64        // the latest sample's seq, as published
	snap     *frame        // the latest snapshot encoded; nil before one is asked for
	events   []*frame      // the events of samples head-len(events)+1 .. head, oldest first
	advanced chan struct{} // closed, and replaced, when head moves
	streams  int           // event streams being served
	// streamEnded is the clock's reading when the latest stream ended, or
	// math.MinInt64: the sampler encodes events for resumeGrace after, for
	// its client to come back to.
	streamEnded int64
	closed      bool
	closing     chan struct{} // closed by Close: ends the streams

	// Encodings made, for tests to count.
	snapshotsEncoded, eventsEncoded atomic.Uint64

	stop      context.CancelFunc
	done      chan struct{} // closed when the sampler goroutine has returned
	closeOnce sync.Once
}

// New returns a dashboard of g (slidegate.Default() if g is nil) and starts
// its sampler goroutine, unless [WithInterval] says not to. A bad option is
// an error matching [slidegate.ErrInvalidConfig] that names it. New reads the guard
// at once, so that the first sample's rates cover the time since New. The
// dashboard reads the guard's clock once per sample, and the sampler
// sleeps on it: a clock.Manual given to the guard drives it too.
func New(g *slidegate.Guard, opts ...Option) (*Dashboard, error) {
	if g == nil {
		g = slidegate.Default()
	}
	cfg := config{
		interval: defaultInterval, history: defaultHistory,
		maxStreams: defaultMaxStreams, maxStreamAge: defaultMaxStreamAge, snapshotPoints: defaultSnapshotPoints,
		topKeys: defaultTopKeys,
	}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.err != nil {
		return nil, cfg.err
	}
	d := &Dashboard{
		g:              g,
		clock:          g.Clock(),
		interval:       cfg.interval,
		history:        cfg.history,
		snapshotPoints: cfg.snapshotPoints,
		maxStreams:     cfg.maxStreams,
		topKeys:        cfg.topKeys,
		token:          cfg.token,
		budgets:        cfg.budgets,
		writeTimeout:   writeTimeout,
		streamAge:      cfg.maxStreamAge,
		instance:       strconv.FormatUint(rand.Uint64()>>32, 36),
		series:         make(map[string]*series),
		inbound:        &series{name: "inbound"},
		advanced:       make(chan struct{}),
		closing:        make(chan struct{}),
		streamEnded:    math.MinInt64,
		done:           make(chan struct{}),
	}
	d.wallBase, d.monoBase = time.Now(), d.clock.Now()
	d.sampling.Lock()
	d.observe(d.monoBase, false)
	d.sampling.Unlock()

	d.mux = http.NewServeMux()
	d.mux.HandleFunc("GET /{$}", d.servePage)
	d.mux.HandleFunc("GET /assets/", serveAsset)
	d.mux.HandleFunc("GET /api/snapshot", d.serveSnapshot)
	d.mux.HandleFunc("GET /api/history", d.serveHistory)
	d.mux.HandleFunc("GET /api/events", d.serveEvents)
	d.mux.HandleFunc("GET /api/rules", d.serveRules)
	d.mux.HandleFunc("PUT /api/rules", d.putRules)

	ctx, cancel := context.WithCancel(context.Background())
	d.stop = cancel
	if d.interval > 0 {
		go d.run(ctx)
	} else {
		close(d.done)
	}
	return d, nil
}

// run samples the guard every interval until ctx ends.
func (d *Dashboard) run(ctx context.Context) {
	defer close(d.done)
	for clock.Sleep(ctx, d.clock, d.interval) == nil {
		d.Sample()
	}
}

// Close stops the sampler goroutine, waits for it to return, and ends the
// event streams being served; a request for a new one is answered 503. The
// other endpoints keep working, and Sample may still be called. Close
// returns nil, and may be called more than once.
func (d *Dashboard) Close() error {
	if d.stop == nil {
		return nil // a zero Dashboard: nothing was started
	}
	d.closeOnce.Do(func() {
		d.stop()
		<-d.done
		d.mu.Lock()
		d.closed = true
		close(d.closing)
		d.mu.Unlock()
	})
	return nil
}

// ServeHTTP serves the page, its assets and the API, at paths relative to
// where the dashboard is mounted (strip the mount point with
// http.StripPrefix). A request for the mount point without its trailing
// slash ("/slidegate") is redirected to it ("/slidegate/"), so that the page's
// relative URLs resolve.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if d.mux == nil {
		httpError(w, http.StatusInternalServerError, "the dashboard was not made by dashboard.New")
		return
	}
	if r.URL.Path == "" {
		// StripPrefix left nothing: the request named the mount point
		// without its slash. Redirect relative to it, by its last element
		// (http.Redirect would resolve a relative target against the
		// stripped path, which has lost the prefix).
		p, _, _ := strings.Cut(r.RequestURI, "?")
		target := "./"
		if b := path.Base(p); b != "." && b != "/" {
			target = b + "/"
		}
		w.Header().Set("Location", target)
		w.WriteHeader(http.StatusMovedPermanently)
		return
	}
	d.mux.ServeHTTP(w, r)
}
