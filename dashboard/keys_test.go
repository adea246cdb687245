package dashboard

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/flowlimits"
)

// keyed sends n requests with key to resource, and returns how many were
// blocked.
func (f *fixture) keyed(t testing.TB, resource, key string, n int) int {
	t.Helper()
	blocked := 0
	for range n {
		err := f.g.Do(context.Background(), resource, func() error { return nil }, slidegate.WithKey(key))
		switch {
		case errors.Is(err, flow.ErrBlocked):
			blocked++
		case err != nil:
			t.Fatal(err)
		}
	}
	return blocked
}

func TestSnapshotsAndEventsCarryTheTopKeys(t *testing.T) {
	f := newFixture(t, nil)
	if err := f.g.SetRules(mustRules(t, `{"flow":[
		{"resource":"GET /a","limit":100},
		{"resource":"GET /a","limit":10,"interval":"2s","per_key":true,"overrides":{"abuser":10,"busy":10}},
		{"resource":"GET /a","limit":100,"interval":"1m","per_key":true},
		{"resource":"GET /b","limit":100},
		{"resource":"GET /c","limit":5,"per_key":true,"cluster":false,"type":"concurrency"}]}`)); err != nil {
		t.Fatal(err)
	}
	// abuser and busy have overrides of the rule's own limit, which count
	// them exactly from their first request: quiet is then the only key in
	// the sketch, where a key without one is counted until it uses over half
	// its limit, and no other key's counts can make it look busy enough to
	// be tracked, nor its counts add to theirs.
	if b := f.keyed(t, "GET /a", "abuser", 50); b != 40 {
		t.Fatalf("abuser: %d of 50 blocked, want 40", b)
	}
	f.keyed(t, "GET /a", "busy", 8)  // tracked: it has requests counted
	f.keyed(t, "GET /a", "quiet", 1) // under half its limit: not tracked
	f.keyed(t, "GET /b", "abuser", 5)
	f.keyed(t, "GET /c", "abuser", 5)
	f.step(time.Millisecond)

	want := &keysJSON{Interval: 2, Top: []keyJSON{{"abuser", 10, 40}, {"busy", 8, 0}}}
	check := func(from string, rs []resourceJSON) {
		t.Helper()
		for _, r := range rs {
			switch r.Name {
			case "GET /a":
				if !reflect.DeepEqual(r.Keys, want) {
					t.Errorf("%s: GET /a's keys %+v, want %+v", from, r.Keys, want)
				}
			default: // no per-key rule, or none whose keys the guard tracks
				if r.Keys != nil {
					t.Errorf("%s: %s has keys %+v", from, r.Name, r.Keys)
				}
			}
		}
	}
	check("snapshot", f.snapshot(t).Resources)

	srv := newServer(t, f.d)
	s := openStream(t, srv.URL+"/api/events")
	var snap snapshotJSON
	s.next(t, "snapshot", &snap)
	f.keyed(t, "GET /a", "abuser", 5)
	want.Top[0].Blocked += 5
	f.step(time.Millisecond)
	var ev eventJSON
	s.next(t, "sample", &ev)
	check("event", ev.Resources)

	// The keys are written as JSON writes a string: escaped, never as
	// markup, and an empty list while no key is tracked.
	f.clk.Advance(time.Hour)
	f.d.Sample()
	f.d.sampling.Lock()
	frame := f.d.encodeEvent(false)
	f.d.sampling.Unlock()
	if !strings.Contains(string(frame.data), `"keys":{"interval":2,"top":[]}`) {
		t.Errorf("an hour later, GET /a's keys are not an empty list:\n%s", frame.data)
	}
}

func TestTopKeysAreTheBusiestAndTheMostBlocked(t *testing.T) {
	long := strings.Repeat("x", 64)
	ks := []slidegate.KeyStat{
		{Key: "a", Allowed: 100}, {Key: "b", Allowed: 90}, {Key: "c", Allowed: 5, Blocked: 50},
		{Key: "d", Allowed: 1, Blocked: 60}, {Key: "e", Allowed: 2, Blocked: 40}, {Key: "f", Allowed: 3},
		{Key: long + "1", Allowed: 40, Blocked: 30}, {Key: long + "2", Allowed: 45, Blocked: 25}, // one key once cut
		{Key: "k\xff", Allowed: 1}, {Key: "k\xfe", Allowed: 1}, // one key once valid UTF-8
	}
	got := topKeys(slices.Clone(ks), 2)
	want := []keyJSON{{"a", 100, 0}, {"b", 90, 0}, {long, 85, 55}, {"d", 1, 60}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("top 2:\n%v, want\n%v", got, want)
	}
	if got := topKeys(slices.Clone(ks), 0); len(got) != 0 {
		t.Errorf("top 0: %v", got)
	}
	got = topKeys(slices.Clone(ks), 100)
	if len(got) != 8 || !slices.Contains(got, keyJSON{"k\uFFFD", 2, 0}) {
		t.Errorf("top 100: %v, want the 8 keys, k\\xff and k\\xfe added up", got)
	}
}

// topKeys against a model: sort by each count, take the first n, join.
func TestTopKeysMatchesAModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		ks := make([]slidegate.KeyStat, rng.IntN(30))
		for i := range ks {
			ks[i] = slidegate.KeyStat{Key: fmt.Sprint("k", rng.IntN(40)), Allowed: rng.Int64N(5), Blocked: rng.Int64N(4)}
		}
		n := rng.IntN(8)
		got := topKeys(slices.Clone(ks), n)

		sum := map[string]keyJSON{}
		for _, k := range ks {
			s := sum[k.Key]
			sum[k.Key] = keyJSON{k.Key, s.Allowed + k.Allowed, s.Blocked + k.Blocked}
		}
		var all []keyJSON
		for _, k := range sum {
			all = append(all, k)
		}
		order := func(first, second func(keyJSON) int64) func(a, b keyJSON) int {
			return func(a, b keyJSON) int {
				return cmp.Or(cmp.Compare(first(b), first(a)), cmp.Compare(second(b), second(a)), strings.Compare(a.Key, b.Key))
			}
		}
		allowed := func(k keyJSON) int64 { return k.Allowed }
		blocked := func(k keyJSON) int64 { return k.Blocked }
		want := map[string]keyJSON{}
		slices.SortFunc(all, order(blocked, allowed))
		for _, k := range all[:min(n, len(all))] {
			if k.Blocked > 0 {
				want[k.Key] = k
			}
		}
		slices.SortFunc(all, order(allowed, blocked))
		for _, k := range all[:min(n, len(all))] {
			want[k.Key] = k
		}
		wantList := make([]keyJSON, 0, len(want))
		for _, k := range want {
			wantList = append(wantList, k)
		}
		slices.SortFunc(wantList, order(allowed, blocked))
		if !reflect.DeepEqual(got, wantList) {
			t.Fatalf("topKeys(%v, %d) =\n%v, want\n%v", ks, n, got, wantList)
		}
	}
}

func TestTopKeysOption(t *testing.T) {
	for _, n := range []int{-1, maxTopKeys + 1} {
		_, err := New(newFixture(t, nil).g, WithInterval(0), WithTopKeys(n))
		if !errors.Is(err, errInvalidConfig) || !strings.Contains(err.Error(), fmt.Sprintf("top keys = %d", n)) {
			t.Errorf("WithTopKeys(%d): %v, want an error naming it", n, err)
		}
	}
	f := newFixture(t, nil, WithTopKeys(0))
	if err := f.g.SetRules(mustRules(t, `{"flow":[{"resource":"GET /a","limit":10,"per_key":true}]}`)); err != nil {
		t.Fatal(err)
	}
	f.keyed(t, "GET /a", "abuser", 50)
	f.step(time.Millisecond)
	if r, ok := findResource(f.snapshot(t), "GET /a"); !ok || r.Keys != nil {
		t.Errorf("WithTopKeys(0): GET /a %+v, want it without keys", r)
	}
}

// json.Marshal must not fail on any key: the frame would be lost.
func TestAnyKeyEncodes(t *testing.T) {
	for _, key := range []string{"", "\x00", "\xff\xfe", "<img src=x onerror=alert(1)>", "\u2028\u2029", `"}]}`} {
		top := topKeys([]slidegate.KeyStat{{Key: key, Allowed: 1}}, 1)
		b, err := json.Marshal(top)
		if err != nil {
			t.Fatalf("%q: %v", key, err)
		}
		var back []keyJSON
		if err := json.Unmarshal(b, &back); err != nil || len(back) != 1 || back[0].Key != strings.ToValidUTF8(key, "\uFFFD") {
			t.Errorf("%q encodes as %s, decodes as %q, %v", key, b, back, err)
		}
	}
}

// BenchmarkSampleTopKeys measures a sample of a guard with one resource
// whose per-key rule tracks as many keys as it can (512),
// with the default WithTopKeys and with WithTopKeys(0), which reads none:
// the difference is what reading the keys costs a sample.
func BenchmarkSampleTopKeys(b *testing.B) {
	f := newFixture(b, nil)
	if err := f.g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "GET /a", Limit: 1, PerKey: true}}}); err != nil {
		b.Fatal(err)
	}
	for i := range 2 * flowlimits.DefaultHotKeys {
		f.keyed(b, "GET /a", fmt.Sprint("user-", i), 2)
	}
	for _, n := range []int{defaultTopKeys, 0} {
		b.Run(fmt.Sprint("top=", n), func(b *testing.B) {
			d, err := New(f.g, WithInterval(0), WithTopKeys(n))
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			b.ReportAllocs()
			for b.Loop() {
				f.clk.Advance(time.Nanosecond) // a sample needs time to divide by; the keys stay in their window
				d.Sample()
			}
		})
	}
}
