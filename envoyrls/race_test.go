package envoyrls

import (
	"context"
	"sync"
	"testing"
)

// Many clients at once on the same keys never get more than the limit,
// and an answer OK never holds a status over the limit (outside shadow
// and quota modes): deciding is a check of every window, then a count,
// and a count that finds the room gone refuses the request.
func TestConcurrentRequestsNeverPassTheLimit(t *testing.T) {
	r := newRig(t, map[string]string{"d.yaml": hitsConfig}, Settings{})
	const workers, each = 8, 150
	var mu sync.Mutex
	allowed := 0
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				// Half ask a alone, half a and files=own/x together: a refusal by
				// either must leave a uncounted.
				req := request("d", desc("a", "shared"))
				if (w+i)%2 == 0 {
					req = request("d", desc("a", "shared"), desc("files", "own/x"))
				}
				resp, err := r.client.ShouldRateLimit(context.Background(), req)
				if err != nil {
					t.Error(err)
					return
				}
				for _, st := range resp.Statuses {
					if resp.OverallCode == ok && st.Code == over {
						t.Errorf("OK with a status over the limit: %v", resp)
					}
				}
				if resp.OverallCode == ok {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	// The clock stands still: a allows 10, files=own/x 3 of them.
	if allowed > 10 {
		t.Fatalf("%d allowed on a key of 10 a second", allowed)
	}
	if allowed < 3 {
		t.Fatalf("only %d allowed", allowed)
	}
	// Every request allowed is counted in a. (A request that files refuses
	// after a counted it, in the instant between check and count, stays
	// counted in a: a may count more, never fewer.)
	st := r.ask(t, request("d", desc("a", "shared"))).Statuses[0]
	if used := 10 - int(st.LimitRemaining) - 1; st.Code == ok && used < allowed {
		t.Fatalf("a counts %d, but %d requests were allowed", used, allowed)
	}
}
