package etcdrules

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/etcdrules/internal/etcdtest"
)

// patience bounds every wait of these tests: a condition polled until it
// holds, never a fixed sleep. It is generous, for a loaded machine.
const patience = 20 * time.Second

const rulesKey = "/slidegate/rules"

// doc is a rules document with one QPS rule of the given limit.
func doc(limit int) string {
	return fmt.Sprintf("flow:\n  - resource: GET /orders\n    limit: %d\n    interval: 1s\n", limit)
}

// limitOf is the limit of the one rule of rules as doc writes them, or -1.
func limitOf(r slidegate.Rules) int64 {
	if len(r.Flow) != 1 {
		return -1
	}
	return r.Flow[0].Limit
}

func put(t *testing.T, c *clientv3.Client, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if _, err := c.Put(ctx, key, value); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func del(t *testing.T, c *clientv3.Client, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if _, err := c.Delete(ctx, key); err != nil {
		t.Fatalf("delete %s: %v", key, err)
	}
}

func newSource(t *testing.T, c *clientv3.Client, key string, opts ...Option) *Source {
	t.Helper()
	s, err := New(c, key, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func read(t *testing.T, s *Source) (slidegate.Rules, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	return s.Rules(ctx)
}

// eventually polls cond until it returns "" (it holds) and fails the test
// with cond's last word when it has not held within patience.
func eventually(t *testing.T, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %s", what, patience, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitChange waits for a value on s.Changes.
func waitChange(t *testing.T, s *Source, what string) {
	t.Helper()
	select {
	case _, ok := <-s.Changes():
		if !ok {
			t.Fatalf("%s: Changes closed", what)
		}
	case <-time.After(patience):
		t.Fatalf("%s: no change signalled within %v", what, patience)
	}
}

// drain takes a pending signal off s.Changes, if there is one.
func drain(s *Source) {
	select {
	case <-s.Changes():
	default:
	}
}

// waitWatchers waits until the server has n watchers.
func waitWatchers(t *testing.T, srv *etcdtest.Server, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("the server has %d watchers", n), func() string {
		got, err := srv.Watchers()
		if err != nil {
			return err.Error()
		}
		if got != n {
			return fmt.Sprintf("it has %d", got)
		}
		return ""
	})
}

// settled starts a source on key and returns it once its watch is in place
// on the server and the signals of its start are taken, so that the next
// signal is one a change caused.
func settled(t *testing.T, srv *etcdtest.Server, c *clientv3.Client, key string, opts ...Option) *Source {
	t.Helper()
	s := newSource(t, c, key, opts...)
	waitWatchers(t, srv, 1)
	waitChange(t, s, "the watch's creation")
	return s
}

func TestRulesReadsTheDocumentAtTheKey(t *testing.T) {
	srv := etcdtest.Start(t)
	c := srv.Client()
	put(t, c, rulesKey, doc(100))
	put(t, c, "/slidegate/rules.json", `{"flow": [{"resource": "GET /orders", "limit": 7}]}`)
	put(t, c, "/slidegate/json-without-extension", `{"flow": [{"resource": "GET /orders", "limit": 8}]}`)

	for _, tc := range []struct {
		key  string
		opts []Option
		want int64
	}{
		{rulesKey, nil, 100},
		{"/slidegate/rules.json", nil, 7},
		{"/slidegate/json-without-extension", []Option{WithJSON()}, 8},
	} {
		r, err := read(t, newSource(t, c, tc.key, tc.opts...))
		if err != nil {
			t.Fatalf("%s: Rules: %v", tc.key, err)
		}
		if got := limitOf(r); got != tc.want {
			t.Errorf("%s: limit %d, want %d (rules %+v)", tc.key, got, tc.want, r)
		}
	}
}

func TestAChangeIsSignalledAndReadAfterIt(t *testing.T) {
	srv := etcdtest.Start(t)
	c := srv.Client()
	put(t, c, rulesKey, doc(100))
	s := settled(t, srv, c, rulesKey)
	if r, err := read(t, s); err != nil || limitOf(r) != 100 {
		t.Fatalf("first read: %+v, %v; want limit 100", r, err)
	}
	drain(s) // a signal of the connection, if it came after the watch's

	for limit := 200; limit <= 400; limit += 100 {
		put(t, c, rulesKey, doc(limit))
		waitChange(t, s, fmt.Sprintf("put limit %d", limit))
		r, err := read(t, s)
		if err != nil || limitOf(r) != int64(limit) {
			t.Fatalf("read after put limit %d: %+v, %v", limit, r, err)
		}
	}
}

func TestAKeyDeletedIsAnErrorNotEmptyRules(t *testing.T) {
	srv := etcdtest.Start(t)
	c := srv.Client()
	put(t, c, rulesKey, doc(100))
	s := settled(t, srv, c, rulesKey)
	drain(s)

	del(t, c, rulesKey)
	waitChange(t, s, "delete")
	r, err := read(t, s)
	if !errors.Is(err, ErrNoRules) {
		t.Fatalf("Rules after delete: %+v, %v; want an error wrapping ErrNoRules", r, err)
	}
	for _, want := range []string{rulesKey, "flow: []", "rules in force stay"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	var re *slidegate.RulesError
	if errors.As(err, &re) {
		t.Errorf("a missing key is a RulesError (%v); want a read error, as a missing file is", err)
	}

	// A JSON key's hint speaks JSON.
	_, err = read(t, newSource(t, c, "/absent.json"))
	if !errors.Is(err, ErrNoRules) || !strings.Contains(err.Error(), "put {}") {
		t.Errorf("missing JSON key: %v; want ErrNoRules saying put {}", err)
	}
}

func TestAnInvalidDocumentIsARulesErrorNamingTheKey(t *testing.T) {
	srv := etcdtest.Start(t)
	c := srv.Client()
	for _, tc := range []struct {
		name, key, value string
		opts             []Option
		want             []string
	}{
		{"unknown field", rulesKey, "flow:\n  - resource: a\n    limt: 5\n", nil,
			[]string{"etcd:" + rulesKey, `unknown field "limt"`, "line 3"}},
		{"empty", rulesKey, "", nil, []string{"etcd:" + rulesKey, "flow: []"}},
		{"binary", rulesKey, "\x00\xff\xfe{[", nil, []string{"etcd:" + rulesKey}},
		{"YAML at a JSON key", "/r.json", doc(5), nil, []string{"etcd:/r.json"}},
		{"JSON asked for", "/r", "{\"flow\": [{\"resource\": \"a\", \"limit\": \"ten\"}]}", []Option{WithJSON()},
			[]string{"etcd:/r:", `"ten"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			put(t, c, tc.key, tc.value)
			r, err := read(t, newSource(t, c, tc.key, tc.opts...))
			var re *slidegate.RulesError
			if !errors.As(err, &re) {
				t.Fatalf("Rules: %+v, %v; want a *slidegate.RulesError", r, err)
			}
			if re.Source != "etcd:"+tc.key {
				t.Errorf("RulesError.Source %q, want %q", re.Source, "etcd:"+tc.key)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestAValueOverTheLimitIsRefused(t *testing.T) {
	srv := etcdtest.Start(t)
	c := srv.Client()
	// A sound document padded with a comment to exactly size bytes.
	padded := func(size int) string {
		d := doc(100) + "# "
		return d + strings.Repeat("x", size-len(d)-1) + "\n"
	}
	for _, tc := range []struct {
		name    string
		size    int
		opts    []Option
		refused bool
	}{
		{"default limit", defaultMaxSize, nil, false},
		{"default limit and a byte", defaultMaxSize + 1, nil, true},
		{"limit of 4096", 4096, []Option{WithMaxSize(4096)}, false},
		{"limit of 4096 and a byte", 4097, []Option{WithMaxSize(4096)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			value := padded(tc.size)
			if len(value) != tc.size {
				t.Fatalf("padded to %d bytes, want %d", len(value), tc.size)
			}
			put(t, c, rulesKey, value)
			r, err := read(t, newSource(t, c, rulesKey, tc.opts...))
			if !tc.refused {
				if err != nil || limitOf(r) != 100 {
					t.Fatalf("%d bytes: %+v, %v; want limit 100", tc.size, r, err)
				}
				return
			}
			var re *slidegate.RulesError
			if !errors.As(err, &re) || re.Source != "etcd:"+rulesKey {
				t.Fatalf("%d bytes: %v; want a RulesError of etcd:%s", tc.size, err, rulesKey)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("%d bytes", tc.size)) || !strings.Contains(err.Error(), "WithMaxSize") {
				t.Errorf("error %q does not say the size and the option", err)
			}
		})
	}
}

func TestNewRefusesABadConfiguration(t *testing.T) {
	// No server: New does not reach one.
	c := etcdtest.NewClient(t, "http://127.0.0.1:1")
	for _, tc := range []struct {
		name   string
		client *clientv3.Client
		key    string
		opts   []Option
		want   string
	}{
		{"nil client", nil, rulesKey, nil, "client is nil"},
		{"empty key", c, "", nil, "key is empty"},
		{"zero max size", c, rulesKey, []Option{WithMaxSize(0)}, "WithMaxSize(0)"},
		{"negative max size", c, rulesKey, []Option{WithMaxSize(-5)}, "WithMaxSize(-5)"},
		{"zero timeout", c, rulesKey, []Option{WithTimeout(0)}, "WithTimeout(0s)"},
		{"negative timeout", c, rulesKey, []Option{WithTimeout(-time.Second)}, "WithTimeout(-1s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.client, tc.key, tc.opts...)
			if s != nil {
				s.Close()
			}
			if !errors.Is(err, errInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v; want errInvalidConfig saying %q", err, tc.want)
			}
		})
	}
}

func TestStringNamesTheKeyOnly(t *testing.T) {
	c := etcdtest.NewClient(t, "http://user:secret@127.0.0.1:1")
	s := newSource(t, c, rulesKey)
	if got := s.String(); got != "etcd:"+rulesKey {
		t.Errorf("String() = %q, want %q", got, "etcd:"+rulesKey)
	}
}

func TestRulesReturnsWhenTheServerIsDown(t *testing.T) {
	srv := etcdtest.Start(t)
	c := srv.Client()
	srv.Stop()
	s := newSource(t, c, rulesKey, WithTimeout(500*time.Millisecond))
	start := time.Now()
	_, err := read(t, s)
	if err == nil || errors.Is(err, ErrNoRules) {
		t.Fatalf("Rules with the server down: %v; want a read error", err)
	}
	if !strings.Contains(err.Error(), rulesKey) {
		t.Errorf("error %q does not name the key", err)
	}
	// The timeout is 0.5 s; patience leaves room for a loaded machine
	// and fails a read that waits for the server to come back.
	if d := time.Since(start); d > patience/2 {
		t.Errorf("Rules took %v with a timeout of 500ms", d)
	}

	// A context done returns at once, whatever the timeout.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := newSource(t, c, rulesKey).Rules(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Rules with a canceled context: %v; want context.Canceled", err)
	}
}

func TestTheServerDownAndBack(t *testing.T) {
	srv := etcdtest.Start(t)
	c := srv.Client()
	put(t, c, rulesKey, doc(100))
	s := settled(t, srv, c, rulesKey, WithTimeout(time.Second))

	srv.Stop()
	if _, err := read(t, s); err == nil {
		t.Fatal("Rules read the key with the server down")
	}
	drain(s)
	srv.Restart()
	// The connection comes back, and with it a signal to read again.
	waitChange(t, s, "the server back")
	if r, err := read(t, s); err != nil || limitOf(r) != 100 {
		t.Fatalf("read after restart: %+v, %v; want limit 100", r, err)
	}
	// The watch is back in place: a put is signalled.
	waitWatchers(t, srv, 1)
	drain(s)
	put(t, c, rulesKey, doc(200))
	waitChange(t, s, "put after restart")
	if r, err := read(t, s); err != nil || limitOf(r) != 200 {
		t.Fatalf("read after put: %+v, %v; want limit 200", r, err)
	}
}

func TestAChangeMadeWhileTheWatchWasDownIsSeen(t *testing.T) {
	srv := etcdtest.Start(t)
	writer := srv.Client()
	put(t, writer, rulesKey, doc(100))
	// The source reaches the server through a proxy, which takes the
	// server away from the source alone while the writer changes the key.
	proxy := etcdtest.NewProxy(t, strings.TrimPrefix(srv.Endpoint, "http://"))
	s := settled(t, srv, etcdtest.NewClient(t, proxy.Endpoint), rulesKey, WithTimeout(time.Second))

	proxy.Cut()
	waitWatchers(t, srv, 0) // the server has dropped the watch
	put(t, writer, rulesKey, doc(300))
	if _, err := read(t, s); err == nil {
		t.Fatal("Rules read the key through a cut proxy")
	}
	drain(s)
	proxy.Restore()
	eventually(t, "the change made while the watch was down is read", func() string {
		select {
		case <-s.Changes():
		case <-time.After(100 * time.Millisecond):
			return "no signal yet"
		}
		r, err := read(t, s)
		if err != nil || limitOf(r) != 300 {
			return fmt.Sprintf("read %+v, %v", r, err)
		}
		return ""
	})
}

func TestCloseStopsTheWatchAndClosesChanges(t *testing.T) {
	srv := etcdtest.Start(t)
	c := srv.Client()
	s := settled(t, srv, c, rulesKey)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	eventually(t, "Changes closed", func() string {
		select {
		case _, ok := <-s.Changes():
			if !ok {
				return ""
			}
			return "a signal, not closed"
		default:
			return "not closed"
		}
	})
	waitWatchers(t, srv, 0)
	// The client is the caller's, and still works.
	put(t, c, rulesKey, doc(5))
	if r, err := read(t, s); err != nil || limitOf(r) != 5 {
		t.Errorf("Rules after Close: %+v, %v; want limit 5 (the client is open)", r, err)
	}
}

func TestCloseReturnsWithTheServerDown(t *testing.T) {
	srv := etcdtest.Start(t)
	c := srv.Client()
	srv.Stop()
	s := newSource(t, c, rulesKey) // its watch waits for a server
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(patience):
		t.Fatalf("Close did not return within %v with the server down", patience)
	}
	for range s.Changes() { // ends only if Changes is closed
	}
}

// A server may send more than a client wants to take: a client bounded by
// MaxCallRecvMsgSize refuses the message, the source reports it as a read
// that failed, and its watch is created again, so that a sound value put
// afterwards is signalled and read.
func TestAValueOverTheClientsLimitIsSurvived(t *testing.T) {
	srv := etcdtest.Start(t)
	writer := srv.Client()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:          []string{srv.Endpoint},
		DialTimeout:        2 * time.Second,
		MaxCallRecvMsgSize: 64 << 10,
		Logger:             zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	put(t, writer, rulesKey, doc(100))
	s := settled(t, srv, c, rulesKey, WithMaxSize(32<<10))
	drain(s)

	put(t, writer, rulesKey, doc(200)+"#"+strings.Repeat("x", 512<<10)+"\n")
	waitChange(t, s, "a value over the client's limit")
	if r, err := read(t, s); err == nil {
		t.Fatalf("read a value over the client's limit: %+v", r)
	}
	put(t, writer, rulesKey, doc(300))
	eventually(t, "a sound value after it is read", func() string {
		select {
		case <-s.Changes():
		case <-time.After(100 * time.Millisecond):
			return "no signal yet"
		}
		r, err := read(t, s)
		if err != nil || limitOf(r) != 300 {
			return fmt.Sprintf("read %+v, %v", r, err)
		}
		return ""
	})
}

// A watch that cannot resume, for the revisions it missed were compacted
// away while it was down, is ended by the server; the source creates it
// again and signals, so that what changed is read and later changes are
// signalled.
func TestAWatchCompactedAwayIsCreatedAgain(t *testing.T) {
	srv := etcdtest.Start(t)
	writer := srv.Client()
	put(t, writer, rulesKey, doc(100))
	proxy := etcdtest.NewProxy(t, strings.TrimPrefix(srv.Endpoint, "http://"))
	s := settled(t, srv, etcdtest.NewClient(t, proxy.Endpoint), rulesKey, WithTimeout(time.Second))

	proxy.Cut()
	waitWatchers(t, srv, 0)
	put(t, writer, rulesKey, doc(200))
	put(t, writer, "/other", "x")
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	last, err := writer.Get(ctx, "/other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Compact(ctx, last.Header.Revision); err != nil {
		t.Fatalf("compact: %v", err)
	}
	drain(s)
	proxy.Restore()
	eventually(t, "the change made before the compaction is read", func() string {
		select {
		case <-s.Changes():
		case <-time.After(100 * time.Millisecond):
			return "no signal yet"
		}
		r, err := read(t, s)
		if err != nil || limitOf(r) != 200 {
			return fmt.Sprintf("read %+v, %v", r, err)
		}
		return ""
	})
	waitWatchers(t, srv, 1)
	drain(s)
	put(t, writer, rulesKey, doc(300))
	waitChange(t, s, "a put after the watch was created again")
	if r, err := read(t, s); err != nil || limitOf(r) != 300 {
		t.Fatalf("read after put: %+v, %v; want limit 300", r, err)
	}
}

// A Source closed while its watch is being created (here, after a read, as
// a follower that stops at once would) leaves no watch behind on the
// server, though the client it was given stays open.
func TestCloseWhileTheWatchIsCreatedLeavesNoWatch(t *testing.T) {
	srv := etcdtest.Start(t)
	c := srv.Client()
	put(t, c, rulesKey, doc(100))
	for range 10 {
		s, err := New(c, rulesKey)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := read(t, s); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	waitWatchers(t, srv, 0)
}

// A connection that comes back is signalled, though nothing changed: a
// reader whose reads failed meanwhile reads again at once rather than at
// the end of its backoff.
func TestAReconnectIsSignalled(t *testing.T) {
	srv := etcdtest.Start(t)
	c := srv.Client()
	put(t, c, rulesKey, doc(100))
	proxy := etcdtest.NewProxy(t, strings.TrimPrefix(srv.Endpoint, "http://"))
	s := settled(t, srv, etcdtest.NewClient(t, proxy.Endpoint), rulesKey, WithTimeout(time.Second))
	// A watch resumes from the revision after the last event it reported,
	// or else from the one it was created at, which it would report again:
	// have it report one, so that its resumption reports nothing.
	drain(s)
	put(t, c, rulesKey, doc(150))
	waitChange(t, s, "a put")

	proxy.Cut()
	waitWatchers(t, srv, 0)
	if _, err := read(t, s); err == nil {
		t.Fatal("Rules read the key through a cut proxy")
	}
	drain(s)
	proxy.Restore()
	waitChange(t, s, "the connection back")
	if r, err := read(t, s); err != nil || limitOf(r) != 150 {
		t.Fatalf("read after the connection is back: %+v, %v; want limit 150", r, err)
	}
}
