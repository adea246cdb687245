package compare

import (
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/flowsim"
)

// TestAccuracy runs the accuracy simulation of cmd/accuracy. It asserts the
// bound only for slidegate's limiter, which guarantees it; for the others it
// checks that the simulation ran and measured something, and logs their
// numbers (go test -v).
func TestAccuracy(t *testing.T) {
	tables, err := Accuracy(AccuracyLimit, AccuracyInterval, AccuracyDuration, AccuracySeed)
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) != len(AccuracyLimiters()) {
		t.Fatalf("got %d tables, want %d", len(tables), len(AccuracyLimiters()))
	}
	for _, tab := range tables {
		name := tab.Limiter.Name
		if len(tab.Results) != len(flowsim.Patterns()) {
			t.Errorf("%s: %d results, want one per pattern (%d)", name, len(tab.Results), len(flowsim.Patterns()))
		}
		for _, r := range tab.Results {
			if r.Offered == 0 || r.Allowed == 0 || r.MaxInInterval == 0 || r.PerInterval == 0 {
				t.Errorf("%s, %s: nothing measured: %+v", name, r.Pattern, r)
			}
			if r.Allowed > r.Offered {
				t.Errorf("%s, %s: allowed %d of %d offered", name, r.Pattern, r.Allowed, r.Offered)
			}
			if tab.Limiter.Ours && r.MaxInInterval > AccuracyLimit {
				t.Errorf("%s, %s: %d allowed in one interval, limit %d", name, r.Pattern, r.MaxInInterval, AccuracyLimit)
			}
		}
		var b strings.Builder
		if err := flowsim.WriteTable(&b, name, AccuracyLimit, tab.Results); err != nil {
			t.Fatal(err)
		}
		t.Log("\n" + b.String())
	}
}
