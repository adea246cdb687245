package envoyrls

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const followA = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n"
const followB = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5}\n"

// limitOf is the limit the service applies now to descriptor k=v of d.
func limitOf(t *testing.T, svc *Service) uint32 {
	t.Helper()
	resp, err := svc.shouldRateLimitAt(0, request("d", desc("k", "probe")))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Statuses[0].CurrentLimit == nil {
		return 0
	}
	return resp.Statuses[0].CurrentLimit.RequestsPerUnit
}

// waitFor polls until cond holds, for at most 20 s: the watcher reads the
// directory 100 ms after it goes quiet, on a machine that may be busy.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Follow reloads a changed directory, keeps the config in force when a
// new one is refused, and takes a ConfigMap's swap of its data link.
func TestFollowReloadsAndKeepsTheConfigInForceWhenANewOneIsRefused(t *testing.T) {
	dir := t.TempDir()
	data1, data2 := filepath.Join(dir, "..v1"), filepath.Join(dir, "..v2")
	must(t, os.Mkdir(data1, 0o755))
	must(t, os.Mkdir(data2, 0o755))
	write(t, filepath.Join(data1, "d.yaml"), followA)
	write(t, filepath.Join(data2, "d.yaml"), followB)
	must(t, os.Symlink("..v1", filepath.Join(dir, "..data")))
	must(t, os.Symlink("..data/d.yaml", filepath.Join(dir, "d.yaml")))

	svc, err := New(Settings{Logger: quietLogger()})
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	must(t, svc.Follow(ctx, dir))
	if got := limitOf(t, svc); got != 1 {
		t.Fatalf("limit %d at the start, want 1", got)
	}

	// The ConfigMap's update: a new data link renamed over the old one.
	must(t, os.Symlink("..v2", filepath.Join(dir, "..data_tmp")))
	must(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	waitFor(t, "the limit of the new data is in force", func() bool { return limitOf(t, svc) == 5 })

	// A file with a problem: refused whole, the config in force stays.
	before, reads := svc.state.Load(), svc.reads.Load()
	writeAtomic(t, filepath.Join(dir, "e.yaml"), "domain: e\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight}\n")
	waitFor(t, "the watcher read the file with a problem", func() bool { return svc.reads.Load() > reads })
	if svc.state.Load() != before || limitOf(t, svc) != 5 {
		t.Fatal("a refused config changed the one in force")
	}
	// Mended, it loads.
	writeAtomic(t, filepath.Join(dir, "e.yaml"), "domain: e\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 3}\n")
	waitFor(t, "the mended file is in force", func() bool {
		_, ok := svc.state.Load().cfg.domains["e"]
		return ok
	})
	// Loaded at the start, after the swap and mended; refused once (a
	// refused content is counted once, however often it is read).
	if st := svc.Stats(); st.ConfigLoads != 3 || st.ConfigRefused != 1 {
		t.Fatalf("%d configs loaded, %d refused; want 3 and 1", st.ConfigLoads, st.ConfigRefused)
	}
}

// writeAtomic replaces the file at path by one of content, renamed over
// it: the watcher never reads it half written.
func writeAtomic(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	write(t, tmp, content)
	must(t, os.Rename(tmp, path))
}

// A rule whose limit changes in a reload keeps what its keys used: it
// counts against the new limit until it leaves the old window.
func TestAReloadKeepsWhatARulesKeysUsed(t *testing.T) {
	r := newRig(t, map[string]string{"d.yaml": followB}, Settings{}) // 5 a second
	for range 4 {
		r.ask(t, request("d", desc("k", "x")))
	}
	reload := func(limit string) {
		t.Helper()
		c, err := parseFiles(map[string]string{"d.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: " + limit + "}\n"})
		must(t, err)
		must(t, r.svc.SetConfig(c))
	}
	reload("6")
	if st := r.ask(t, request("d", desc("k", "x"))).Statuses[0]; st.Code != ok || st.LimitRemaining != 1 {
		t.Fatalf("raised to 6 after 4: %v, want OK with 1 remaining", st)
	}
	reload("3") // 5 used in the last second: over 3 until they leave
	if st := r.ask(t, request("d", desc("k", "x"))).Statuses[0]; st.Code != over {
		t.Fatalf("lowered to 3 after 5: %v, want refused", st)
	}
	r.clock.Advance(time.Second + time.Second/20) // a unit and a bucket: the old hits have left
	if st := r.ask(t, request("d", desc("k", "x"))).Statuses[0]; st.Code != ok || st.LimitRemaining != 2 {
		t.Fatalf("a second later: %v, want OK with 2 of 3 remaining", st)
	}
}

// Rules of one limit and unit share one window: a config of many rules
// costs the windows of its distinct limits.
func TestRulesOfOneLimitShareOneWindow(t *testing.T) {
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n")
	for i := range 500 {
		fmt.Fprintf(&b, "  - key: tenant\n    value: t%d\n    rate_limit: {unit: second, requests_per_unit: %d}\n", i, 10+i%3)
	}
	r := newRig(t, map[string]string{"d.yaml": b.String()}, Settings{})
	if n := len(r.svc.shapes.m); n != 3 {
		t.Fatalf("%d windows for 500 rules of 3 limits", n)
	}
	// Each tenant is still limited on its own.
	for i, want := range []uint32{9, 8} {
		if st := r.ask(t, request("d", desc("tenant", "t0"))).Statuses[0]; st.LimitRemaining != want {
			t.Fatalf("t0 request %d: %v", i, st)
		}
	}
	if st := r.ask(t, request("d", desc("tenant", "t3"))).Statuses[0]; st.LimitRemaining != 9 {
		t.Fatalf("t3 after t0: %v", st)
	}
}
