package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

// maxTalliedKeys bounds the keys a blockTally counts one by one: keys come
// from a header, which any client may set.
const maxTalliedKeys = 10_000

// A blockTally counts, over the whole run, the requests that per-key rules
// blocked, by resource and key. The guard's own view of keys
// (Guard.TopKeys) covers only a rule's last two intervals, which is what a
// live view wants; the summary at the end tells the whole run.
type blockTally struct {
	mu     sync.Mutex
	byKey  map[resourceKey]int64
	others map[string]int64 // by resource: the blocks of keys past maxTalliedKeys
}

type resourceKey struct{ resource, key string }

func newBlockTally() *blockTally {
	return &blockTally{byKey: map[resourceKey]int64{}, others: map[string]int64{}}
}

// writeBlocked answers a request the guard blocked, as a JSON API does:
// httpguard's status and Retry-After, and a JSON body that says why. It
// counts the request under its key if a per-key rule blocked it.
func (t *blockTally) writeBlocked(w http.ResponseWriter, _ *http.Request, err error) {
	var be *slidegate.BlockError
	if errors.As(err, &be) && be.Key != "" {
		t.add(be.Resource, be.Key)
	}
	writeJSONBlocked(w, err)
}

// writeJSONBlocked writes httpguard.WriteBlocked's status and Retry-After
// with a JSON body: {"error": "...", "reason": "rate_limited"}. It never
// writes the key, which the client chose.
func writeJSONBlocked(w http.ResponseWriter, err error) {
	status, retryAfter := httpguard.BlockedStatus(err)
	body := struct {
		Error  string `json:"error"`
		Reason string `json:"reason,omitempty"`
	}{Error: strings.ToLower(http.StatusText(status))}
	var be *slidegate.BlockError
	if errors.As(err, &be) {
		body.Reason = be.Reason.Code()
	}
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func (t *blockTally) add(resource, key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := resourceKey{resource, key}
	if _, ok := t.byKey[k]; ok || len(t.byKey) < maxTalliedKeys {
		t.byKey[k]++
		return
	}
	t.others[resource]++
}

// A keyCount is a key and the requests of it blocked.
type keyCount struct {
	key     string
	blocked int64
}

// top returns the n keys of resource with the most requests blocked, the
// most first, and the blocks of the keys past maxTalliedKeys.
func (t *blockTally) top(resource string, n int) ([]keyCount, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var all []keyCount
	for k, b := range t.byKey {
		if k.resource == resource {
			all = append(all, keyCount{k.key, b})
		}
	}
	slices.SortFunc(all, func(a, b keyCount) int {
		return cmp.Or(cmp.Compare(b.blocked, a.blocked), strings.Compare(a.key, b.key))
	})
	return all[:min(n, len(all))], t.others[resource]
}

// keysSummary describes, for each resource with local per-key QPS rules,
// the keys they blocked most over the run, which lasted ran: at most
// three, the most blocked first; or nothing if no rule is per key.
func keysSummary(g *slidegate.Guard, t *blockTally, ran time.Duration) string {
	var b strings.Builder
	seen := map[string]bool{}
	for _, f := range g.Rules().Flow {
		if !f.PerKey || f.Cluster || (f.Type != "" && f.Type != slidegate.QPSRule) || seen[f.Resource] {
			continue
		}
		seen[f.Resource] = true
		keys, others := t.top(f.Resource, 3)
		if len(keys) == 0 && others == 0 {
			fmt.Fprintf(&b, "per-key rules on %s: no key blocked\n", f.Resource)
			continue
		}
		var parts []string
		for i, k := range keys {
			if i == 0 {
				parts = append(parts, fmt.Sprintf("most blocked key %s (%d requests blocked in %v)", k.key, k.blocked, ran.Round(time.Second)))
				continue
			}
			parts = append(parts, fmt.Sprintf("%s (%d)", k.key, k.blocked))
		}
		if others > 0 {
			parts = append(parts, fmt.Sprintf("%d more from keys past the first %d", others, maxTalliedKeys))
		}
		fmt.Fprintf(&b, "per-key rules on %s: %s", f.Resource, strings.Join(parts, "; "))
		b.WriteString("\n")
	}
	return b.String()
}
