package envoyrls

import (
	"context"
	"os"
	"path/filepath"
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
	write(t, filepath.Join(dir, "e.yaml"), "domain: e\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight}\n")
	waitFor(t, "the watcher read the file with a problem", func() bool { return svc.reads.Load() > reads })
	if svc.state.Load() != before || limitOf(t, svc) != 5 {
		t.Fatal("a refused config changed the one in force")
	}
	// Mended, it loads.
	write(t, filepath.Join(dir, "e.yaml"), "domain: e\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 3}\n")
	waitFor(t, "the mended file is in force", func() bool {
		_, ok := svc.state.Load().cfg.domains["e"]
		return ok
	})
}

// A rule whose limit changes in a reload keeps its counts: what a key used
// still counts against the new limit.
func TestAReloadKeepsARulesCounts(t *testing.T) {
	r := newRig(t, map[string]string{"d.yaml": followB}, Settings{})
	for range 4 {
		r.ask(t, request("d", desc("k", "x")))
	}
	c, err := parseFiles(map[string]string{"d.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 6}\n"})
	must(t, err)
	must(t, r.svc.SetConfig(c))
	if st := r.ask(t, request("d", desc("k", "x"))).Statuses[0]; st.Code != ok || st.LimitRemaining != 1 {
		t.Fatalf("after the reload: %v, want OK with 1 of 6 remaining", st)
	}
}
