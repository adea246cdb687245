package main

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func ms2(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

func TestTheSlidingMaxFindsTheBusiestWindowWhereverItStarts(t *testing.T) {
	for _, c := range []struct {
		name string
		ts   []time.Duration
		want int
	}{
		{"empty", nil, 0},
		{"one", ms2(500), 1},
		// 3 before the edge at 1000 and 3 after: a window from 990 holds all six,
		// though each fixed second [0, 1000) and [1000, 2000) holds three.
		{"straddling an edge", ms2(10, 990, 995, 999, 1000, 1005, 1010, 2500), 6},
		// The window is half-open: 0 and 1000 are not in one window of 1 s.
		{"a window's end is outside it", ms2(0, 1000, 2000, 3000), 1},
		{"equal times", ms2(0, 0, 0, 999, 1000, 1000), 4},
		{"the busiest window late", ms2(0, 1500, 1600, 1700, 2400, 2499), 5},
	} {
		if got := maxInWindow(c.ts, time.Second); got != c.want {
			t.Errorf("%s: maxInWindow(%v) = %d, want %d", c.name, c.ts, got, c.want)
		}
	}
}

func TestTheSlidingMaxAgreesWithCountingEveryStartOnRandomSeries(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for range 200 {
		ts := make([]time.Duration, rng.IntN(60))
		for i := range ts {
			ts[i] = time.Duration(rng.IntN(5000)) * time.Millisecond
		}
		ts = sortedCopy(ts)
		want := 0
		for _, start := range ts { // the brute force: a window at every element
			n := 0
			for _, x := range ts {
				if x >= start && x < start+time.Second {
					n++
				}
			}
			want = max(want, n)
		}
		if got := maxInWindow(ts, time.Second); got != want {
			t.Fatalf("maxInWindow(%v) = %d, counting every start gives %d", ts, got, want)
		}
	}
}

func TestTheConfigIsOneDomainWithAPerSecondAndAPerMinuteRuleWhereBothServicesReadIt(t *testing.T) {
	root := t.TempDir()
	dir, err := writeConfig(root, rules{PerSecond: 100, PerMinute: 6000})
	if err != nil {
		t.Fatal(err)
	}
	// envoyproxy/ratelimit reads RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config.
	if want := filepath.Join(root, "ratelimit", "config"); dir != want {
		t.Fatalf("config directory %s, want %s", dir, want)
	}
	b, err := os.ReadFile(filepath.Join(dir, domain+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Domain      string
		Descriptors []struct {
			Key       string
			Value     *string
			RateLimit struct {
				Unit            string
				RequestsPerUnit int64 `yaml:"requests_per_unit"`
			} `yaml:"rate_limit"`
		}
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	type rule struct {
		key, unit string
		n         int64
	}
	var got []rule
	for _, d := range cfg.Descriptors {
		if d.Value != nil {
			t.Errorf("rule %s has a value: each value of the key must be counted on its own", d.Key)
		}
		got = append(got, rule{d.Key, d.RateLimit.Unit, d.RateLimit.RequestsPerUnit})
	}
	want := []rule{{"user", "second", 100}, {"tenant", "minute", 6000}}
	if cfg.Domain != domain || len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("config %q %v, want %q %v:\n%s", cfg.Domain, got, domain, want, b)
	}
}

func TestAConfigWithALimitOutOfRangeIsRefusedNamingIt(t *testing.T) {
	for _, r := range []rules{{0, 60}, {100, 0}, {1 << 32, 60}} {
		_, err := writeConfig(t.TempDir(), r)
		if err == nil || !strings.Contains(err.Error(), "2^32-1") {
			t.Errorf("writeConfig(%+v) = %v, want an error naming the range", r, err)
		}
	}
}

func TestTheEdgeBurstSendsTwiceTheLimitAroundEachEdgeHalfOnEachSide(t *testing.T) {
	var edge pattern
	for _, p := range patterns {
		if strings.HasPrefix(p.name, "burst") {
			edge = p
		}
	}
	const limit = 10
	s := edge.sends(limit, 3*time.Second, nil)
	if len(s) != 2*2*limit {
		t.Fatalf("%d sends in 3 s, want 2 edges of %d", len(s), 2*limit)
	}
	for k, e := range []time.Duration{time.Second, 2 * time.Second} {
		var before, after int
		for _, x := range s[k*2*limit : (k+1)*2*limit] {
			switch {
			case x >= e-edgeSpread/2 && x < e:
				before++
			case x >= e && x < e+edgeSpread/2:
				after++
			default:
				t.Errorf("edge %v: a send at %v, outside %v around it", e, x, edgeSpread)
			}
		}
		if before != limit || after != limit {
			t.Errorf("edge %v: %d before and %d after, want %d each", e, before, after, limit)
		}
	}
	// A fixed window allows the limit on each side: twice the limit within
	// one second, which the sliding max must see.
	if got := maxInWindow(s, time.Second); got != 2*limit {
		t.Errorf("sliding max of the sends %d, want %d", got, 2*limit)
	}
}

func TestCommandstatsAreReadPerCommandWithoutTheMeasurementsOwnAndWithScriptsCountedOnce(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_evalsha:calls=200,usec=9000,usec_per_call=45.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_get:calls=200,usec=400,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_client|setinfo:calls=2,usec=3,usec_per_call=1.50,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=1,usec=50,usec_per_call=50.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_config|resetstat:calls=1,usec=20,usec_per_call=20.00,rejected_calls=0,failed_calls=0\r\n" +
		"# Stats\r\ntotal_reads_processed:205\r\n" +
		"# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:0.750000\r\n" +
		"# Memory\r\nused_memory:1048576\r\n"
	s, err := parseInfo(info)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.commands["info"]; ok {
		t.Error("INFO, the measurement's own, is counted")
	}
	if got := s.commands["client"]; got != (commandStat{2, 3}) {
		t.Errorf("client|setinfo read as %+v, want {2 3}", got)
	}
	// 205 reads less INFO's and CONFIG's.
	if s.reads != 203 || s.cpu != 2 || s.memory != 1<<20 {
		t.Errorf("reads %d, cpu %v, memory %d; want 203, 2, 1048576", s.reads, s.cpu, s.memory)
	}
	// Scripted (slidegate): the GET ran in a script, its time in EVALSHA's.
	if got := s.usec(true); got != 9003 {
		t.Errorf("scripted: %d µs, want 9003 (EVALSHA and CLIENT)", got)
	}
	// Not scripted (envoyproxy/ratelimit): EVALSHA is another service's.
	if got := s.usec(false); got != 403 {
		t.Errorf("not scripted: %d µs, want 403 (GET and CLIENT)", got)
	}
	if got := s.breakdown(100, true); !strings.HasPrefix(got, "EVALSHA 2.00 calls, 90.0 µs; GET 2.00 calls, 4.0 µs (in scripts)") {
		t.Errorf("breakdown %q", got)
	}
}

func TestAPercentileIsTheValueAtItsRank(t *testing.T) {
	s := ms2(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	if got := percentile(s, 0.5); got != 5*time.Millisecond {
		t.Errorf("p50 %v, want 5ms", got)
	}
	if got := percentile(s, 0.99); got != 10*time.Millisecond {
		t.Errorf("p99 %v, want 10ms", got)
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("p50 of nothing %v, want 0", got)
	}
}

func TestTheLiveHeapIsReadFromTheCollectionsBeforeAndAfterTheMark(t *testing.T) {
	path := filepath.Join(t.TempDir(), "svc.log")
	before := "gc 1 @0.010s 1%: 0.01+0.2+0.01 ms clock, 0.02+0/0.1/0+0.02 ms cpu, 3->3->2 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P\n" +
		"time=... level=INFO msg=serving\n" +
		"gc 2 @0.500s 1%: 0.01+0.2+0.01 ms clock, 0.02+0/0.1/0+0.02 ms cpu, 4->4->5 MB, 6 MB goal, 0 MB stacks, 0 MB globals, 2 P\n"
	after := "gc 3 @1.000s 1%: 0.01+0.2+0.01 ms clock, 0.02+0/0.1/0+0.02 ms cpu, 30->31->28 MB, 40 MB goal, 0 MB stacks, 0 MB globals, 2 P\n" +
		"gc 4 @1.200s 1%: 0.01+0.2+0.01 ms clock, 0.02+0/0.1/0+0.02 ms cpu, 50->52->41 MB, 60 MB goal, 0 MB stacks, 0 MB globals, 2 P\n" +
		"gc 5 @1.400s 1%: 0.01+0.2+0.01 ms clock, 0.02+0/0.1/0+0.02 ms cpu, 70->70->39 MB, 80 MB goal, 0 MB stacks, 0 MB globals, 2 P\n" +
		"level=WARN msg=\"redisflow: Redis is down; limiters fall back\" fallback=...\n"
	if err := os.WriteFile(path, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &service{log: path}
	mark := s.logMark()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(after)
	f.Close()
	last, peak, n, err := s.liveHeap(mark)
	if err != nil {
		t.Fatal(err)
	}
	if last != 5 || peak != 41 || n != 3 {
		t.Errorf("live heap before %d, peak after %d, %d collections after; want 5, 41, 3", last, peak, n)
	}
	if got := s.fallbacks(mark); got != 1 {
		t.Errorf("%d fallbacks after the mark, want 1", got)
	}
	if got := s.fallbacks(0); got != 1 {
		t.Errorf("%d fallbacks in all, want 1", got)
	}
	if got := s.fallbacks(s.logMark()); got != 0 {
		t.Errorf("%d fallbacks after the end, want 0", got)
	}
}
