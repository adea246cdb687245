package etcdrules

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/rulefile"
)

// Defaults of the options, stated in their docs.
const (
	// defaultMaxSize is the largest value, in bytes, that a Source reads
	// as rules unless WithMaxSize says otherwise. It is 1 MiB, below
	// etcd's own default request limit of 1.5 MiB.
	defaultMaxSize = 1 << 20
	// defaultTimeout bounds one read of the key unless WithTimeout says
	// otherwise.
	defaultTimeout = 5 * time.Second
)

// The watch is created again after it ends. It waits minRewatch at first,
// and twice as long after each watch that ends before the server confirms
// it, up to maxRewatch. The client itself resumes a watch across a lost
// connection. A watch ends only when the server cancels it (its revision
// compacted away, no leader) or for good (permission denied, the client
// closed). The wait keeps that from becoming a busy loop.
const (
	minRewatch = 500 * time.Millisecond
	maxRewatch = 30 * time.Second
)

// ErrNoRules is wrapped by the error of [Source.Rules] when the key does not
// exist. The rules in force then stay: deleting the key does not clear them.
// Put "flow: []" (YAML) or {} (JSON) at the key to clear them.
var ErrNoRules = errors.New("no rules at key")

// errInvalidConfig is wrapped by the errors of [New]: a nil client, an empty
// key or an option out of range.
var errInvalidConfig = config.Sentinel("etcdrules")

// A Source reads a guard's rules from one key of etcd (the v3 API) and tells
// when the key changes. It implements [rulefile.Source]. Give it to
// [rulefile.Follow], which puts its rules in force and keeps them in step.
//
// The value at the key is a rules document as [rulefile.Parse] reads it. It
// is YAML, or JSON when the key ends in ".json" or [WithJSON] is given.
// Problems are reported under the name "etcd:<key>".
//
// A Source watches the key from [New] until [Source.Close], in a goroutine
// of its own. It signals [Source.Changes] when:
//   - the key is put or deleted.
//   - its watch is created, or created again.
//   - the client's connection comes back after it was lost.
//
// So a read that failed while the server was away is made again at once.
// And a change that a watch could not report is read anyway.
//
// A Source never closes the client it was given: close the Source first,
// then the client. Its methods are safe for concurrent use.
type Source struct {
	kv        clientv3.KV
	watcher   clientv3.Watcher // the Source's own, closed by Close
	key       string
	name      string // "etcd:<key>", as String and log lines name it
	parseName string // what rulefile.Parse is given, whose extension picks the format
	isJSON    bool
	maxSize   int
	timeout   time.Duration

	changes   chan struct{}
	ctx       context.Context // done at Close
	cancel    context.CancelFunc
	running   sync.WaitGroup // the watch and connection goroutines
	closeOnce sync.Once
}

// An Option configures a Source.
type Option func(*Source) error

// WithJSON reads the value at the key as JSON, whatever the key's name.
// Without it, a key ending in ".json" (in any case) is read as JSON and any
// other as YAML.
func WithJSON() Option {
	return func(s *Source) error {
		s.isJSON = true
		return nil
	}
}

// WithMaxSize sets the largest value, in bytes, read as rules. A larger
// value is refused with a [*slidegate.RulesError], and the rules in force
// stay. It is 1 MiB unless set, below etcd's own default request limit of
// 1.5 MiB; n must be positive.
//
// The limit applies to the value the client has received. What the client
// accepts from the network at all is bounded by its
// [clientv3.Config].MaxCallRecvMsgSize, which is [math.MaxInt32] by default.
// Set it a little above the limit when the server is not trusted: the
// watch's events carry the value too. A message over it fails the read. It
// also ends the watch, which is created again.
func WithMaxSize(n int) Option {
	return func(s *Source) error {
		if n <= 0 {
			return fmt.Errorf("%w: WithMaxSize(%d): the size must be positive", errInvalidConfig, n)
		}
		s.maxSize = n
		return nil
	}
}

// WithTimeout bounds each read of the key. [Source.Rules] returns an error
// when the server has not answered within d, or when its context is done,
// whichever comes first. It is 5 s unless set; d must be
// positive.
func WithTimeout(d time.Duration) Option {
	return func(s *Source) error {
		if d <= 0 {
			return fmt.Errorf("%w: WithTimeout(%v): the timeout must be positive", errInvalidConfig, d)
		}
		s.timeout = d
		return nil
	}
}

// New returns a Source of the rules at key, read through client, and starts
// watching the key. It does not reach the server. If the server is down at
// start, [Source.Rules] fails and the watch waits for the server;
// [rulefile.Follow] falls back on its last good rules. The caller keeps
// client open until after [Source.Close].
//
// The Source reads and watches through a KV and a Watcher of its own on the
// client's connection ([clientv3.NewKV], [clientv3.NewWatcher]). Closing it
// ends its watch on the server. The key is the whole key: a prefix that the
// client's own KV or Watcher adds (package namespace) does not apply.
func New(client *clientv3.Client, key string, opts ...Option) (*Source, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: client is nil", errInvalidConfig)
	}
	if key == "" {
		return nil, fmt.Errorf("%w: key is empty", errInvalidConfig)
	}
	name := "etcd:" + key
	s := &Source{
		key:     key,
		name:    name,
		maxSize: defaultMaxSize,
		timeout: defaultTimeout,
		changes: make(chan struct{}, 1),
	}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	s.parseName = name
	if strings.EqualFold(extension(key), ".json") {
		s.isJSON = true
	} else if s.isJSON {
		s.parseName = name + " as .json" // rulefile.Parse picks JSON by the name's extension
	}
	s.kv, s.watcher = clientv3.NewKV(client), clientv3.NewWatcher(client)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.running.Add(1)
	go s.watch()
	if conn := client.ActiveConnection(); conn != nil {
		s.running.Add(1)
		go s.followConnection(conn)
	}
	return s, nil
}

// extension is the key's extension as filepath.Ext finds a file's: from the
// last dot after the last slash.
func extension(key string) string {
	for i := len(key) - 1; i >= 0 && key[i] != '/'; i-- {
		if key[i] == '.' {
			return key[i:]
		}
	}
	return ""
}

// String returns the source's name, "etcd:<key>". It names no endpoint and
// no credentials.
func (s *Source) String() string { return s.name }

// Rules reads the key and parses its value. It returns:
//   - the rules, when the value is a sound rules document.
//   - a [*slidegate.RulesError] named "etcd:<key>", for a bad value.
//   - an error wrapping [ErrNoRules], when the key does not exist.
//   - another error, when the server cannot be read in time.
//
// The RulesError lists every problem of the document, or says that the
// value is over the limit ([WithMaxSize]). The server is not read in time
// when the timeout ([WithTimeout]) passes, or ctx is done first.
//
// Rules reads through the client alone. It works after [Source.Close] as
// long as the client is open.
func (s *Source) Rules(ctx context.Context) (slidegate.Rules, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.kv.Get(ctx, s.key)
	if err != nil {
		return slidegate.Rules{}, fmt.Errorf("etcdrules: reading key %q: %w", s.key, err)
	}
	if len(resp.Kvs) == 0 {
		clear := `"flow: []"`
		if s.isJSON {
			clear = "{}"
		}
		return slidegate.Rules{}, fmt.Errorf("etcdrules: %w %q: the key does not exist, and the rules in force stay; to clear them, put %s at the key",
			ErrNoRules, s.key, clear)
	}
	value := resp.Kvs[0].Value
	if len(value) > s.maxSize {
		return slidegate.Rules{}, &slidegate.RulesError{Source: s.name, Problems: []slidegate.Problem{{
			Reason: "the value is " + strconv.Itoa(len(value)) + " bytes, more than the limit of " +
				strconv.Itoa(s.maxSize) + " (WithMaxSize)"}}}
	}
	r, err := rulefile.Parse(s.parseName, value)
	var re *slidegate.RulesError
	if errors.As(err, &re) {
		re.Source = s.name // not parseName, which may say "as .json" to Parse
	}
	return r, err
}

// Changes returns the channel that receives a value when the rules may have
// changed since they were last read. It has a buffer of one and is sent to
// without blocking, so a burst of changes makes one read. [Source.Close]
// closes it; nothing else does.
func (s *Source) Changes() <-chan struct{} { return s.changes }

// Close stops watching the key. Once the Source's goroutines have returned,
// it closes the [Source.Changes] channel. It does not close the client.
// Close is safe to call more than once, and always returns nil.
func (s *Source) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		s.running.Wait()
		// The client leaves a watch that was canceled before the server
		// confirmed it in place on the server for as long as its stream
		// lasts; closing the Source's own watcher ends the stream.
		s.watcher.Close()
		close(s.changes)
	})
	return nil
}

// changed signals Changes without blocking: a signal already pending
// covers this one, for the read it causes comes after both.
func (s *Source) changed() {
	select {
	case s.changes <- struct{}{}:
	default:
	}
}

// watch watches the key until Close, creating the watch again whenever it
// ends.
//
// A watch is created without a start revision, so it reports the changes
// after its creation, and its creation is signalled as a change: whatever
// changed before it (while no watch was in place, or before the first
// read) is seen by the read that signal causes. That needs no revision
// bookkeeping and cannot fail on a revision compacted away. Across a lost
// connection the client resumes the watch from the revision after the last
// event it reported (or from the one it was created at), so changes made
// while the connection was down are reported once it is back; if those
// revisions were compacted away meanwhile, the server ends the watch and
// it is created again.
func (s *Source) watch() {
	defer s.running.Done()
	wait := minRewatch
	for {
		// WithRequireLeader has a member cut off from its cluster's
		// leader end the watch rather than keep it silently stale.
		ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(s.ctx))
		for resp := range s.watcher.Watch(ctx, s.key, clientv3.WithCreatedNotify()) {
			switch {
			case resp.Created:
				wait = minRewatch
				s.changed()
			case len(resp.Events) > 0:
				s.changed()
			}
			// A canceled watch (compacted, no leader, an error) sends
			// its error last and its channel closes.
		}
		cancel()
		if s.ctx.Err() != nil {
			return
		}
		// A change may have gone unreported between the watch's end and
		// the next one's creation, which signals too; signalling now
		// also has a reader learn at once why the server cannot be read.
		s.changed()
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
			return
		}
		wait = min(2*wait, maxRewatch)
	}
}

// followConnection signals a change whenever the client's connection
// becomes ready after it was not, so that a read that failed while the
// server was away is made again without waiting for the reader's backoff.
// A server that comes back resumes the watch, which reports what changed
// meanwhile; this covers a reader that failed to read before the watch had
// anything to report.
func (s *Source) followConnection(conn *grpc.ClientConn) {
	defer s.running.Done()
	state := conn.GetState()
	for state != connectivity.Shutdown {
		if !conn.WaitForStateChange(s.ctx, state) {
			return // Close
		}
		next := conn.GetState()
		if next == connectivity.Ready && state != connectivity.Ready {
			s.changed()
		}
		state = next
	}
}
