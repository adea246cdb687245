package rulefile

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/internal/syncbuf"
)

// reloadsOf watches path for g and returns the watcher and a function that
// waits for its next reload (10 s at most, so that a busy machine does not
// fail the test) and returns its error and the flow limits in force after it.
// newGuard returns a guard without options, failing the test if it cannot.
func newGuard(t *testing.T) *slidegate.Guard {
	t.Helper()
	g, err := slidegate.New()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func reloadsOf(t *testing.T, g *slidegate.Guard, path string, opts ...Option) (*Follower, func() ([]int64, error)) {
	t.Helper()
	type reload struct {
		err    error
		limits []int64
	}
	ch := make(chan reload, 100)
	opts = append(opts, OnReload(func(err error) {
		var limits []int64
		for _, f := range g.Rules().Flow {
			limits = append(limits, f.Limit)
		}
		ch <- reload{err, limits}
	}))
	w, err := Watch(g, path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w, func() ([]int64, error) {
		t.Helper()
		select {
		case r := <-ch:
			return r.limits, r.err
		case <-time.After(10 * time.Second):
			t.Fatal("no reload within 10 s of a change")
			return nil, nil
		}
	}
}

// rulesWithLimit is a rules file whose one flow rule has limit n.
func rulesWithLimit(n string) string { return "flow:\n  - resource: a\n    limit: " + n + "\n" }

// TestWatcherFollowsAKubernetesConfigMapUpdate performs what kubelet does to
// a ConfigMap mounted as a directory, twice: the file the service reads is
// a link to ..data/rules.yaml, and ..data a link swapped in one rename to a
// new directory, so no event ever names rules.yaml.
func TestWatcherFollowsAKubernetesConfigMapUpdate(t *testing.T) {
	dir := t.TempDir()
	var current string
	// update writes content as kubelet's atomic writer does.
	update := func(stamp, content string) {
		t.Helper()
		data := filepath.Join(dir, stamp)
		if err := os.Mkdir(data, 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(data, "rules.yaml"), content)
		if err := os.Symlink(stamp, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		if current != "" {
			if err := os.RemoveAll(filepath.Join(dir, current)); err != nil {
				t.Fatal(err)
			}
		}
		current = stamp
	}
	update("..2026_11_24_10_00_00.123", rulesWithLimit("1"))
	path := filepath.Join(dir, "rules.yaml")
	if err := os.Symlink(filepath.Join("..data", "rules.yaml"), path); err != nil {
		t.Fatal(err)
	}
	g := newGuard(t)
	var log syncbuf.Buffer
	_, next := reloadsOf(t, g, path, WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	if got := g.Rules().Flow[0].Limit; got != 1 {
		t.Fatalf("limit = %d at first, want 1", got)
	}
	for i, stamp := range []string{"..2026_11_24_10_01_00.456", "..2026_11_24_10_02_00.789"} {
		limit := int64(2 + i)
		update(stamp, rulesWithLimit(string(rune('0'+limit))))
		if limits, err := next(); err != nil || len(limits) != 1 || limits[0] != limit {
			t.Fatalf("update %d: reload %v with limits %v, want nil and [%d]", i+1, err, limits, limit)
		}
	}
	if n := strings.Count(log.String(), "rules file reloaded"); n != 2 {
		t.Errorf("%d reloads logged, want 2:\n%s", n, log.String())
	}
}

// A file reached through a link in another directory is followed when it
// is changed there.
func TestWatcherFollowsAFileBehindALinkInAnotherDirectory(t *testing.T) {
	real := filepath.Join(t.TempDir(), "rules.yaml")
	write(t, real, rulesWithLimit("1"))
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.Symlink(real, path); err != nil {
		t.Fatal(err)
	}
	_, next := reloadsOf(t, newGuard(t), path)
	write(t, real, rulesWithLimit("2"))
	if limits, err := next(); err != nil || len(limits) != 1 || limits[0] != 2 {
		t.Fatalf("reload %v with limits %v, want nil and [2]", err, limits)
	}
}

// Other files changing in the directory all the time neither reload the
// rules nor keep the watcher from seeing the rules file change.
func TestWatcherIsNotKeptBusyByOtherFilesInItsDirectory(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	write(t, path, rulesWithLimit("1"))
	_, next := reloadsOf(t, newGuard(t), path)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			os.WriteFile(filepath.Join(dir, "other.log"), []byte(strings.Repeat("x", i%100)), 0o644)
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(200 * time.Millisecond) // let the other file's changes be seen
	tmp := filepath.Join(dir, "rules.yaml.tmp")
	write(t, tmp, rulesWithLimit("2"))
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	// The first reload is the change: the other file's made none.
	if limits, err := next(); err != nil || len(limits) != 1 || limits[0] != 2 {
		t.Fatalf("reload %v with limits %v, want nil and [2]", err, limits)
	}
}

func TestWatcherReloadsAndKeepsTheRulesWhenTheFileIsBad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	write(t, path, goodYAML)
	g := newGuard(t)
	w, next := reloadsOf(t, g, path)
	// A bad file: refused, the rules in force stay.
	write(t, path, "flow:\n  - resource: a\n    limit: -5\n")
	if _, err := next(); err == nil {
		t.Fatal("a bad file was put in force")
	}
	if n := len(g.Rules().Flow); n != 2 {
		t.Fatalf("%d flow rules in force after a bad file, want 2", n)
	}
	// A good file replacing it by rename, as editors do.
	tmp := filepath.Join(dir, "rules.yaml.tmp")
	write(t, tmp, "flow:\n  - resource: a\n    limit: 7\n")
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if limits, err := next(); err != nil || len(limits) != 1 || limits[0] != 7 {
		t.Fatalf("reload %v with limits %v, want nil and [7]", err, limits)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestWatchRefusesABadFileAtOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	write(t, path, "flow: [")
	if _, err := Watch(newGuard(t), path); err == nil {
		t.Fatal("Watch accepted a bad file")
	}
}

func TestWatchReturnsAnErrorNamingABadOption(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	write(t, path, "flow: []\n")
	for _, tc := range []struct {
		opt  Option
		want string
	}{
		{WithLogger(nil), "logger = nil"},
		{WithClock(nil), "clock = nil"},
		{WithSettle(0), "settle = 0s"},
	} {
		w, err := Watch(newGuard(t), path, tc.opt)
		if w != nil || !errors.Is(err, errInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Watch: %v, %v; want an errInvalidConfig naming %q", w, err, tc.want)
		}
	}
}
