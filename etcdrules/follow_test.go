package etcdrules

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/etcdrules/internal/etcdtest"
	"github.com/slidegate/slidegate/internal/syncbuf"
	"github.com/slidegate/slidegate/rulefile"
)

// These tests follow a key with rulefile.Follow, as a program would.

func newGuard(t *testing.T) *slidegate.Guard {
	t.Helper()
	g, err := slidegate.New()
	if err != nil {
		t.Fatalf("slidegate.New: %v", err)
	}
	return g
}

func follow(t *testing.T, g *slidegate.Guard, s *Source, opts ...rulefile.Option) *rulefile.Follower {
	t.Helper()
	f, err := rulefile.Follow(g, s, opts...)
	if err != nil {
		t.Fatalf("Follow: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// waitLimit waits until g's one rule has the limit want.
func waitLimit(t *testing.T, g *slidegate.Guard, want int64, what string) {
	t.Helper()
	eventually(t, what, func() string {
		if got := limitOf(g.Rules()); got != want {
			return fmt.Sprintf("limit in force %d, want %d", got, want)
		}
		return ""
	})
}

// reloads collects what OnReload reports.
type reloads chan error

func (r reloads) option() rulefile.Option {
	return rulefile.OnReload(func(err error) { r <- err })
}

// next waits for the next reload.
func (r reloads) next(t *testing.T, what string) error {
	t.Helper()
	select {
	case err := <-r:
		return err
	case <-time.After(patience):
		t.Fatalf("%s: no reload within %v", what, patience)
		return nil
	}
}

func TestFollowPutsAnUpdateInForce(t *testing.T) {
	srv := etcdtest.Start(t)
	c := srv.Client()
	put(t, c, rulesKey, doc(100))
	g := newGuard(t)
	follow(t, g, newSource(t, c, rulesKey))
	if got := limitOf(g.Rules()); got != 100 {
		t.Fatalf("limit in force after Follow %d, want 100", got)
	}
	put(t, c, rulesKey, doc(200))
	waitLimit(t, g, 200, "the update put in force")
	put(t, c, rulesKey, `{"flow": []}`) // YAML's flow style: clears the rules
	eventually(t, "the rules cleared", func() string {
		if r := g.Rules(); len(r.Flow) != 0 {
			return fmt.Sprintf("rules in force %+v", r)
		}
		return ""
	})
}

func TestFollowKeepsTheRulesWhenTheKeyIsDeletedOrInvalid(t *testing.T) {
	srv := etcdtest.Start(t)
	c := srv.Client()
	put(t, c, rulesKey, doc(100))
	g := newGuard(t)
	var log syncbuf.Buffer
	got := make(reloads, 16)
	follow(t, g, newSource(t, c, rulesKey, WithMaxSize(4096)),
		got.option(), rulefile.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))

	del(t, c, rulesKey)
	if err := got.next(t, "delete"); !errors.Is(err, ErrNoRules) {
		t.Fatalf("reload after delete: %v; want ErrNoRules", err)
	}
	if l := limitOf(g.Rules()); l != 100 {
		t.Fatalf("limit in force after delete %d, want 100 (the rules in force stay)", l)
	}

	for _, tc := range []struct{ name, value, want string }{
		{"unknown field", "flow:\n  - resource: a\n    limt: 5\n", `unknown field \"limt\"`},
		{"bad value", doc(-1), "limit: -1 must not be negative"},
		{"too large", doc(300) + "#" + strings.Repeat("x", 5000) + "\n", "more than the limit of 4096"},
	} {
		put(t, c, rulesKey, tc.value)
		err := got.next(t, tc.name)
		for err != nil && !errors.As(err, new(*slidegate.RulesError)) {
			err = got.next(t, tc.name) // the key read again, after its outage
		}
		if err == nil {
			t.Fatalf("%s: put in force; rules %+v", tc.name, g.Rules())
		}
		if l := limitOf(g.Rules()); l != 100 {
			t.Fatalf("%s: limit in force %d, want 100 (the rules in force stay)", tc.name, l)
		}
		eventually(t, tc.name+": logged", func() string {
			if s := log.String(); !strings.Contains(s, tc.want) || !strings.Contains(s, "etcd:"+rulesKey) {
				return "log:\n" + s
			}
			return ""
		})
	}

	put(t, c, rulesKey, doc(200))
	waitLimit(t, g, 200, "a sound document after the bad ones")
}

func TestFollowThroughTheServerDownAndBack(t *testing.T) {
	srv := etcdtest.Start(t)
	c := srv.Client()
	put(t, c, rulesKey, doc(100))
	g := newGuard(t)
	got := make(reloads, 16)
	follow(t, g, newSource(t, c, rulesKey, WithTimeout(time.Second)), got.option())

	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_, err := c.Put(ctx, rulesKey, doc(150))
	cancel()
	if err == nil {
		t.Fatal("a put succeeded with the server down")
	}
	srv.Restart()
	put(t, c, rulesKey, doc(200))
	waitLimit(t, g, 200, "a put after the restart")
	put(t, c, rulesKey, doc(300))
	waitLimit(t, g, 300, "a second put after the restart")
}

func TestFollowStartsFromTheLastGoodRulesWhenEtcdIsDown(t *testing.T) {
	srv := etcdtest.Start(t)
	c := srv.Client()
	lastGood := filepath.Join(t.TempDir(), "rules.json")
	put(t, c, rulesKey, doc(100))
	first := newGuard(t)
	f := follow(t, first, newSource(t, c, rulesKey), rulefile.WithLastGood(lastGood))
	put(t, c, rulesKey, doc(200))
	waitLimit(t, first, 200, "the first process's update")
	f.Close()

	srv.Stop()
	// Without the last good rules, a start with etcd down fails.
	if f, err := rulefile.Follow(newGuard(t), newSource(t, c, rulesKey, WithTimeout(time.Second))); err == nil {
		f.Close()
		t.Fatal("Follow with etcd down and no last good rules returned no error")
	}
	// With them, it puts them in force and follows the key once etcd is
	// back.
	g := newGuard(t)
	follow(t, g, newSource(t, c, rulesKey, WithTimeout(time.Second)), rulefile.WithLastGood(lastGood))
	if l := limitOf(g.Rules()); l != 200 {
		t.Fatalf("limit in force after a cold start %d, want 200 (the last good rules)", l)
	}
	srv.Restart()
	put(t, c, rulesKey, doc(300))
	waitLimit(t, g, 300, "a put once etcd is back")
}

func TestFollowerCloseClosesTheSource(t *testing.T) {
	srv := etcdtest.Start(t)
	c := srv.Client()
	put(t, c, rulesKey, doc(100))
	s := newSource(t, c, rulesKey)
	f := follow(t, newGuard(t), s)
	if err := f.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for range s.Changes() { // ends only if Changes is closed
	}
	waitWatchers(t, srv, 0)
}

func TestFollowSeesAChangeMadeWhileCutOff(t *testing.T) {
	srv := etcdtest.Start(t)
	writer := srv.Client()
	put(t, writer, rulesKey, doc(100))
	proxy := etcdtest.NewProxy(t, strings.TrimPrefix(srv.Endpoint, "http://"))
	g := newGuard(t)
	follow(t, g, newSource(t, etcdtest.NewClient(t, proxy.Endpoint), rulesKey, WithTimeout(time.Second)))
	waitWatchers(t, srv, 1)

	proxy.Cut()
	waitWatchers(t, srv, 0)
	put(t, writer, rulesKey, doc(300))
	proxy.Restore()
	waitLimit(t, g, 300, "the change made while the follower was cut off")
}
