package rulefile

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// These tests drive the watcher's waits with a manual clock: the watcher
// sleeps on it, the test sees it asleep (Sleepers) and advances it, so no
// outcome depends on how fast the machine runs. Only the file system's
// events arrive in real time, and the tests wait for them as long as it
// takes.

// asleep waits until the watcher sleeps on m, which it does once it has
// seen a change or read the file and waits for the next read.
func asleep(t *testing.T, m *clock.Manual) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for m.Sleepers() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the watcher did not wait on the clock within 10 s (%d waits)", m.Sleepers())
		}
		time.Sleep(time.Millisecond)
	}
}

// stillAsleep checks that advancing m did not end the watcher's wait.
func stillAsleep(t *testing.T, m *clock.Manual) {
	t.Helper()
	if n := m.Sleepers(); n != 1 {
		t.Fatalf("the watcher's wait ended (%d waits), want it still waiting", n)
	}
}

func appendTo(t *testing.T, path, data string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// A writer rewriting the file in place pauses, for ten settle times, with
// "limit: 100" cut to "limit: 1": the watcher must not put that in force,
// and puts in force the whole file once it is written.
func TestWatcherDoesNotApplyAFileCutMidLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	write(t, path, rulesWithLimit("7"))
	m := clock.NewManual(0)
	_, next := reloadsOf(t, newGuard(t), path, WithClock(m))

	write(t, path, "flow:\n  - resource: a\n    limit: 1") // the first half
	asleep(t, m)
	m.Advance(defaultSettle) // the first read: the first half, which looks cut short
	asleep(t, m)
	m.Advance(10 * defaultSettle) // the writer pauses
	stillAsleep(t, m)
	appendTo(t, path, "00\n  - resource: b\n    limit: 5\n") // the second half
	m.Advance(defaultCutShort)                               // the second read: the whole file, not yet agreed
	asleep(t, m)
	m.Advance(defaultSettle) // the third read agrees
	if limits, err := next(); err != nil || len(limits) != 2 || limits[0] != 100 || limits[1] != 5 {
		t.Fatalf("first reload %v with limits %v, want nil and the whole file's [100 5]", err, limits)
	}
}

// A YAML file without a newline at its end is put in force once it has
// stayed as it is for a second, not before.
func TestWatcherAppliesAFileWithoutAFinalNewlineOnceItStaysUnchanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	write(t, path, rulesWithLimit("7"))
	m := clock.NewManual(0)
	_, next := reloadsOf(t, newGuard(t), path, WithClock(m))

	write(t, path, "flow:\n  - resource: a\n    limit: 3")
	asleep(t, m)
	m.Advance(defaultSettle)
	asleep(t, m)
	m.Advance(defaultCutShort - 1)
	stillAsleep(t, m)
	m.Advance(1)
	if limits, err := next(); err != nil || len(limits) != 1 || limits[0] != 3 {
		t.Fatalf("reload %v with limits %v, want nil and [3]", err, limits)
	}
}

// A file that changes between two reads is read again until two agree: the
// content it had at the first read is never put in force.
func TestWatcherWaitsForTwoReadsToAgree(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	write(t, path, rulesWithLimit("7"))
	m := clock.NewManual(0)
	settle := 200 * time.Millisecond
	_, next := reloadsOf(t, newGuard(t), path, WithClock(m), WithSettle(settle))

	write(t, path, rulesWithLimit("1"))
	asleep(t, m)
	m.Advance(settle) // the first read: limit 1
	asleep(t, m)
	write(t, path, rulesWithLimit("2"))
	m.Advance(settle - 1) // the settle time is the one asked for
	stillAsleep(t, m)
	m.Advance(1) // the second read: limit 2, which differs
	asleep(t, m)
	m.Advance(settle) // the third read agrees with the second
	if limits, err := next(); err != nil || len(limits) != 1 || limits[0] != 2 {
		t.Fatalf("first reload %v with limits %v, want nil and [2]", err, limits)
	}
}

// A file removed is reported once it has stayed away for a settle time,
// and put in force again when it comes back.
func TestWatcherReportsARemovedFileAndFollowsItBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	write(t, path, rulesWithLimit("7"))
	m := clock.NewManual(0)
	g := newGuard(t)
	_, next := reloadsOf(t, g, path, WithClock(m))

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	asleep(t, m)
	m.Advance(defaultSettle)
	asleep(t, m)
	m.Advance(defaultSettle)
	if limits, err := next(); !os.IsNotExist(err) || len(limits) != 1 || limits[0] != 7 {
		t.Fatalf("reload %v with limits %v, want the file missing and [7] still in force", err, limits)
	}
	write(t, path, rulesWithLimit("7"))
	asleep(t, m)
	m.Advance(defaultSettle)
	asleep(t, m)
	m.Advance(defaultSettle)
	if limits, err := next(); err != nil || len(limits) != 1 || limits[0] != 7 {
		t.Fatalf("reload %v with limits %v, want nil and [7]", err, limits)
	}
}
