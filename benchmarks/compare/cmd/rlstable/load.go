package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// descriptor returns a descriptor of one entry.
func descriptor(key, value string) *ratelimitv3.RateLimitDescriptor {
	return &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: key, Value: value}}}
}

// request returns a request of the domain, one hit, with the descriptors.
func request(d ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: d, HitsAddend: 1}
}

// rpcTimeout bounds each ShouldRateLimit.
const rpcTimeout = 5 * time.Second

// An accuracyResult is one service's run of one pattern.
type accuracyResult struct {
	sent, allowed, failed int
	maxBySend             int // most allowed in any 1 s of send times
	maxByAnswer           int // most allowed in any 1 s of answer times
	fallbacks             int // times slidegate serve --redis fell back from Redis during the run
	firstErr              error
}

// runAccuracy sends the pattern's requests to every service at once, each
// service its own value of "user" (the per-second rule), at the same
// moments, from the next whole second on, and counts the allowed ones.
func runAccuracy(ctx context.Context, svcs []*service, p pattern, limit int, d time.Duration, rng *rand.Rand, run string) []accuracyResult {
	sends := p.sends(limit, d, rng)
	type hit struct{ sent, answered time.Duration }
	allowed := make([][]hit, len(svcs))
	res := make([]accuracyResult, len(svcs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	reqs := make([]*rlsv3.RateLimitRequest, len(svcs))
	for i := range svcs {
		reqs[i] = request(descriptor("user", run+"-"+strconv.Itoa(i)))
	}
	// Start on a whole second of the wall clock, at least 200 ms ahead:
	// the fixed windows' edges are then at whole offsets.
	start := time.Now().Add(200 * time.Millisecond).Truncate(time.Second).Add(time.Second)
	marks := make([]int64, len(svcs))
	for i, s := range svcs {
		marks[i] = s.logMark()
	}
	for _, off := range sends {
		if ctx.Err() != nil {
			break
		}
		time.Sleep(time.Until(start.Add(off)))
		for i, s := range svcs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rctx, cancel := context.WithTimeout(ctx, rpcTimeout)
				defer cancel()
				t0 := time.Now()
				r, err := s.client.ShouldRateLimit(rctx, reqs[i])
				t1 := time.Now()
				mu.Lock()
				defer mu.Unlock()
				res[i].sent++
				switch {
				case err != nil:
					res[i].failed++
					if res[i].firstErr == nil {
						res[i].firstErr = err
					}
				case r.OverallCode == rlsv3.RateLimitResponse_OK:
					res[i].allowed++
					allowed[i] = append(allowed[i], hit{t0.Sub(start), t1.Sub(start)})
				}
			}()
		}
	}
	wg.Wait()
	for i := range svcs {
		bySend := make([]time.Duration, len(allowed[i]))
		byAnswer := make([]time.Duration, len(allowed[i]))
		for j, h := range allowed[i] {
			bySend[j], byAnswer[j] = h.sent, h.answered
		}
		slices.Sort(bySend)
		slices.Sort(byAnswer)
		res[i].maxBySend = maxInWindow(bySend, time.Second)
		res[i].maxByAnswer = maxInWindow(byAnswer, time.Second)
		res[i].fallbacks = svcs[i].fallbacks(marks[i])
	}
	return res
}

// A costResult is one service's run at one concurrency.
type costResult struct {
	decisions, allowed, failed int64
	elapsed                    time.Duration
	p50, p99                   time.Duration
	serviceCPU                 time.Duration // the service's process, user and system
	fallbacks                  int           // times slidegate serve --redis fell back from Redis during the run
	redis                      redisSnapshot // counts since CONFIG RESETSTAT; cpu is the run's
	firstErr                   error
}

// costValues is how many values the cost runs spread over, so that no
// value nears its limit: at 100,000 decisions a second each gets 25 a
// second (of 100), and 1,500 a minute (of the per-minute limit).
const costValues = 4096

// runCost sends requests from conc goroutines, each as soon as the one
// before is answered, for d after a warm-up, and measures the decisions,
// their latency, the service's CPU and, for a service over Redis, what
// Redis did. Each request has the descriptors of one value of "user" and,
// with two descriptors, one value of "tenant".
func runCost(ctx context.Context, s *service, rs redisStats, conc, descriptors int, warm, d time.Duration, run string) (costResult, error) {
	reqs := make([]*rlsv3.RateLimitRequest, costValues)
	for i := range reqs {
		v := run + "-" + strconv.Itoa(i)
		if descriptors == 1 {
			reqs[i] = request(descriptor("user", v))
		} else {
			reqs[i] = request(descriptor("user", v), descriptor("tenant", v))
		}
	}
	var res costResult
	var measuring, stop atomic.Bool
	var next atomic.Int64
	var total atomic.Int64
	var out outcomes
	lats := make([][]time.Duration, conc)
	var wg sync.WaitGroup
	for g := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() && ctx.Err() == nil {
				req := reqs[next.Add(1)%costValues]
				rctx, cancel := context.WithTimeout(ctx, rpcTimeout)
				t0 := time.Now()
				r, err := s.client.ShouldRateLimit(rctx, req)
				lat := time.Since(t0)
				cancel()
				if !measuring.Load() {
					continue
				}
				total.Add(1)
				lats[g] = append(lats[g], lat)
				out.count(r, err)
			}
		}()
	}
	defer func() { stop.Store(true); wg.Wait() }()
	time.Sleep(warm)
	var before redisSnapshot
	if s.redis {
		if err := rs.reset(ctx); err != nil {
			return res, err
		}
		var err error
		if before, err = rs.snapshot(ctx); err != nil {
			return res, err
		}
	}
	cpu0, err := s.cpu()
	if err != nil {
		return res, err
	}
	mark := s.logMark()
	t0 := time.Now()
	measuring.Store(true)
	time.Sleep(d)
	measuring.Store(false)
	res.elapsed = time.Since(t0)
	cpu1, err := s.cpu()
	if err != nil {
		return res, err
	}
	res.serviceCPU = cpu1 - cpu0
	res.fallbacks = s.fallbacks(mark)
	if s.redis {
		after, err := rs.snapshot(ctx)
		if err != nil {
			return res, err
		}
		after.cpu -= before.cpu
		res.redis = after
	}
	stop.Store(true)
	wg.Wait()
	res.decisions = total.Load()
	res.allowed, res.failed, res.firstErr = out.read()
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	all = sortedCopy(all)
	res.p50, res.p99 = percentile(all, 0.50), percentile(all, 0.99)
	return res, nil
}

// A memoryResult is what one service held after a million values.
type memoryResult struct {
	values                  int
	elapsed                 time.Duration
	allowed, failed         int64
	heapBefore, heapPeak    int64 // live heap marked by the last collection before, the most after (MiB, gctrace)
	collections             int
	rssBefore, rssAfter     int64
	keyMemory               int64 // slidegate serve's slidegate_ratelimit_key_memory_bytes, -1 when not slidegate
	redisBefore, redisAfter int64 // used_memory; 0 when not over Redis
	firstErr                error
}

// runMemory sends n distinct values of "tenant" (the per-minute rule), per
// descriptors in each request, from conc goroutines, and measures the
// service's live heap and resident memory and, over Redis, Redis's
// used_memory (from an empty Redis), before and after.
func runMemory(ctx context.Context, s *service, rs redisStats, slidegate bool, n, per, conc int, run string) (memoryResult, error) {
	res := memoryResult{values: n, keyMemory: -1}
	var err error
	if s.redis {
		if err := rs.flush(ctx); err != nil {
			return res, err
		}
		snap, err := rs.snapshot(ctx)
		if err != nil {
			return res, err
		}
		res.redisBefore = snap.memory
	}
	if res.rssBefore, err = s.rss(); err != nil {
		return res, err
	}
	mark := s.logMark()
	var next atomic.Int64
	var out outcomes
	var wg sync.WaitGroup
	t0 := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := make([]*ratelimitv3.RateLimitDescriptor, 0, per)
			for ctx.Err() == nil {
				first := int(next.Add(int64(per))) - per
				if first >= n {
					return
				}
				d = d[:0]
				for v := first; v < min(first+per, n); v++ {
					d = append(d, descriptor("tenant", run+"-"+strconv.Itoa(v)))
				}
				rctx, cancel := context.WithTimeout(ctx, rpcTimeout)
				r, err := s.client.ShouldRateLimit(rctx, request(d...))
				cancel()
				out.count(r, err)
			}
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(t0)
	res.allowed, res.failed, res.firstErr = out.read()
	if res.rssAfter, err = s.rss(); err != nil {
		return res, err
	}
	if res.heapBefore, res.heapPeak, res.collections, err = s.liveHeap(mark); err != nil {
		return res, err
	}
	if slidegate {
		if res.keyMemory, err = s.keyMemory(); err != nil {
			return res, err
		}
	}
	if s.redis {
		snap, err := rs.snapshot(ctx)
		if err != nil {
			return res, err
		}
		res.redisAfter = snap.memory
	}
	if res.failed > 0 {
		return res, fmt.Errorf("%s: %d of the memory run's requests failed: %v", s.name, res.failed, res.firstErr)
	}
	return res, nil
}

// outcomes counts the answers of requests sent from many goroutines: those
// allowed, those that failed, and the first failure.
type outcomes struct {
	allowed, failed atomic.Int64
	firstErr        atomic.Value
}

// count counts one answer, r or err.
func (o *outcomes) count(r *rlsv3.RateLimitResponse, err error) {
	switch {
	case err != nil:
		o.failed.Add(1)
		o.firstErr.CompareAndSwap(nil, err)
	case r.OverallCode == rlsv3.RateLimitResponse_OK:
		o.allowed.Add(1)
	}
}

// read returns what was counted.
func (o *outcomes) read() (allowed, failed int64, firstErr error) {
	firstErr, _ = o.firstErr.Load().(error)
	return o.allowed.Load(), o.failed.Load(), firstErr
}
