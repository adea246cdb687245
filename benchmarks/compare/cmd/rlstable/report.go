package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// report gathers the runs' results and writes them as markdown.
type report struct {
	limit    int
	accuracy []accuracyRow
	cost     []costRow
	memory   []memoryRow
}

type accuracyRow struct {
	p       pattern
	service string
	r       accuracyResult
}

type costRow struct {
	service     string
	redis       bool
	scripted    bool // its Redis commands are scripts
	descriptors int
	conc        int
	r           costResult
}

type memoryRow struct {
	service string
	redis   bool
	r       memoryResult
}

func (rep *report) writeAccuracy(w io.Writer, d time.Duration) {
	fmt.Fprintf(w, "Accuracy: limit %d per second, %v of real time per pattern, the services sent the same requests at the same moments (each its own value). "+
		"Max: the most allowed answers whose requests were sent within any window of 1 s, wherever it starts (a sliding max over the send times); "+
		"by answer: the same over the times the answers came back.\n\n", rep.limit, d)
	fmt.Fprintln(w, "| pattern | service | sent | allowed | max in any 1 s | × limit | by answer | × limit |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|")
	for _, a := range rep.accuracy {
		fmt.Fprintf(w, "| %s | %s%s | %d | %d | %d | %.2f | %d | %.2f |\n", a.p.name, a.service, fellBack(a.r.fallbacks), a.r.sent, a.r.allowed,
			a.r.maxBySend, float64(a.r.maxBySend)/float64(rep.limit), a.r.maxByAnswer, float64(a.r.maxByAnswer)/float64(rep.limit))
	}
	fmt.Fprintln(w)
	for _, p := range patterns {
		fmt.Fprintf(w, "- %s: %s.\n", p.name, p.about)
	}
	fmt.Fprintln(w)
}

func (rep *report) writeCost(w io.Writer) {
	fmt.Fprintln(w, "Cost: each ShouldRateLimit sent as soon as the one before it on its goroutine was answered; values spread so that none nears its limit. "+
		"CPU: the service's process (user and system, /proc, 10 ms ticks). Redis, per decision: µs in commands (INFO commandstats after CONFIG RESETSTAT; a script's time holds its commands'), "+
		"the whole server's CPU (INFO cpu), socket reads (total_reads_processed: one per round trip, or per pipeline, or fewer when requests coalesce) and commands clients sent.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| service | descriptors | concurrency | decisions/s | p50 | p99 | allowed | service CPU µs/decision | Redis µs/decision in commands | Redis CPU µs/decision | Redis reads/decision | commands sent/decision |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, c := range rep.cost {
		n := float64(max(c.r.decisions, 1))
		redisCols := "– | – | – | –"
		if c.redis {
			var calls int64
			for name, s := range c.r.redis.commands {
				if sent(name, c.scripted) {
					calls += s.calls
				}
			}
			redisCols = fmt.Sprintf("%.1f | %.1f | %.2f | %.2f", float64(c.r.redis.usec(c.scripted))/n, c.r.redis.cpu*1e6/n,
				float64(c.r.redis.reads)/n, float64(calls)/n)
		}
		fmt.Fprintf(w, "| %s%s | %d | %d | %.0f | %s | %s | %.1f %% | %.1f | %s |\n", c.service, fellBack(c.r.fallbacks), c.descriptors, c.conc,
			n/c.r.elapsed.Seconds(), ms(c.r.p50), ms(c.r.p99), 100*float64(c.r.allowed)/n,
			float64(c.r.serviceCPU.Microseconds())/n, redisCols)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Redis commands per decision (calls and µs; \"in scripts\": run by a script, its time within the script's):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| service | descriptors | concurrency | commands |")
	fmt.Fprintln(w, "|---|--:|--:|---|")
	for _, c := range rep.cost {
		if c.redis {
			fmt.Fprintf(w, "| %s | %d | %d | %s |\n", c.service, c.descriptors, c.conc, c.r.redis.breakdown(c.r.decisions, c.scripted))
		}
	}
	fmt.Fprintln(w)
}

// fellBack marks a run in which slidegate serve --redis fell back from
// Redis: its decisions were then, for a while, its own windows'.
func fellBack(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (**fell back from Redis %d×**: Redis answered too late)", n)
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

func (rep *report) writeMemory(w io.Writer, per, conc int) {
	if len(rep.memory) == 0 {
		return
	}
	fmt.Fprintf(w, "Memory: %d distinct values of key tenant (the per-minute rule), %d to a request, %d requests in flight, each once. "+
		"Live heap: what the Go collections marked live (GODEBUG=gctrace=1, whole MiB), the last before the run and the most after; "+
		"key memory: slidegate serve's slidegate_ratelimit_key_memory_bytes, bounded by --key-memory (64 MiB); "+
		"Redis: used_memory, from an empty Redis (FLUSHALL before each run).\n\n", rep.memory[0].r.values, per, conc)
	fmt.Fprintln(w, "| service | took | within one unit | live heap before → after | heap growth / value | RSS growth | key memory | Redis used_memory growth | Redis bytes / value |")
	fmt.Fprintln(w, "|---|--:|---|--:|--:|--:|--:|--:|--:|")
	for _, m := range rep.memory {
		v := float64(m.r.values)
		within := "yes"
		if m.r.elapsed >= time.Minute {
			within = "no: longer than a minute"
		}
		key := "–"
		if m.r.keyMemory >= 0 {
			key = mib(m.r.keyMemory)
		}
		redisGrowth, per := "–", "–"
		if m.redis {
			g := m.r.redisAfter - m.r.redisBefore
			redisGrowth, per = mib(g), fmt.Sprintf("%.0f B", float64(g)/v)
		}
		fmt.Fprintf(w, "| %s | %.1f s | %s | %d → %d MiB | %.1f B | %s | %s | %s | %s |\n", m.service, m.r.elapsed.Seconds(), within,
			m.r.heapBefore, m.r.heapPeak, float64((m.r.heapPeak-m.r.heapBefore)<<20)/v, mib(m.r.rssAfter-m.r.rssBefore), key, redisGrowth, per)
	}
	fmt.Fprintln(w)
}

func mib(b int64) string {
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// writeGoals checks the goals the comparison set slidegate serve.
func (rep *report) writeGoals(w io.Writer) {
	fmt.Fprintln(w, "| goal | measured | met |")
	fmt.Fprintln(w, "|---|---|---|")
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "**no**"
	}
	for _, name := range []string{nameSlidegateLocal, nameSlidegateRedis} {
		bySend, byAnswer, n, fell := 0, 0, 0, 0
		for _, a := range rep.accuracy {
			if a.service == name {
				bySend, byAnswer = max(bySend, a.r.maxBySend), max(byAnswer, a.r.maxByAnswer)
				n, fell = n+1, fell+a.r.fallbacks
			}
		}
		if n > 0 {
			fmt.Fprintf(w, "| %s: at most 1.00 × the limit in any 1 s, every pattern | worst %.2f by send times, %.2f by answer times%s | %s |\n", name,
				float64(bySend)/float64(rep.limit), float64(byAnswer)/float64(rep.limit), fellBack(fell), yes(bySend <= rep.limit && byAnswer <= rep.limit))
		}
	}
	find := func(service string, d, c int) *costRow {
		for i := range rep.cost {
			if x := &rep.cost[i]; x.service == service && x.descriptors == d && x.conc == c {
				return x
			}
		}
		return nil
	}
	rate := func(c *costRow) float64 { return float64(c.r.decisions) / c.r.elapsed.Seconds() }
	perDecision := func(c *costRow) float64 { return float64(c.r.redis.usec(c.scripted)) / float64(max(c.r.decisions, 1)) }
	var envoys []string // envoyproxy/ratelimit's configurations measured
	for _, c := range rep.cost {
		if strings.HasPrefix(c.service, nameEnvoy) && !slices.Contains(envoys, c.service) {
			envoys = append(envoys, c.service)
		}
	}
	for _, c := range rep.cost {
		if c.service != nameEnvoy {
			continue
		}
		sr, sl := find(nameSlidegateRedis, c.descriptors, c.conc), find(nameSlidegateLocal, c.descriptors, c.conc)
		for _, name := range envoys {
			e := find(name, c.descriptors, c.conc)
			if e == nil {
				continue
			}
			against := "envoyproxy/ratelimit"
			if name != nameEnvoy {
				against += " with " + strings.TrimPrefix(name, nameEnvoy+", ")
			}
			if sr != nil {
				fmt.Fprintf(w, "| over Redis, %d descriptor(s), concurrency %d: at least the decisions/s, at no more Redis µs a decision, of %s | %.0f against %.0f (%.2f ×); %.1f µs against %.1f (%.1f ×) | %s |\n",
					c.descriptors, c.conc, against, rate(sr), rate(e), rate(sr)/rate(e), perDecision(sr), perDecision(e), perDecision(sr)/max(perDecision(e), 0.01),
					yes(rate(sr) >= rate(e) && perDecision(sr) <= perDecision(e)))
			}
			if sl != nil {
				fmt.Fprintf(w, "| local, %d descriptor(s), concurrency %d: at least 10 × the decisions/s of %s over Redis | %.0f against %.0f (%.2f ×) | %s |\n",
					c.descriptors, c.conc, against, rate(sl), rate(e), rate(sl)/rate(e), yes(rate(sl) >= 10*rate(e)))
			}
		}
	}
	for _, m := range rep.memory {
		if m.r.keyMemory >= 0 && !m.redis {
			fmt.Fprintf(w, "| %s: heap within --key-memory (64 MiB) with %d values | key memory %s, heap growth %d MiB | %s |\n", m.service, m.r.values,
				mib(m.r.keyMemory), m.r.heapPeak-m.r.heapBefore, yes(m.r.keyMemory <= 64<<20 && (m.r.heapPeak-m.r.heapBefore) <= 64))
		}
	}
	fmt.Fprintln(w)
}
