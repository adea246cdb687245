package breaker

import (
	"testing"
	"time"
)

// A circuit that will read its resource's counter makes no window of its
// own, but refuses a window its own would refuse, with the same error,
// before it says why the window cannot be shared.
func TestASharedCircuitRefusesABadWindowAsAnOwnOneDoes(t *testing.T) {
	for _, w := range []struct {
		buckets  int
		interval time.Duration
	}{{-1, 0}, {0, -time.Second}, {3, 10 * time.Second}, {70000, 10 * time.Second}, {10, 5 * time.Microsecond}} {
		_, own := NewCircuit(ErrorRatio(0.5), WithWindow(w.buckets, w.interval))
		_, sh := NewCircuit(ErrorRatio(0.5), WithWindow(w.buckets, w.interval), shared())
		if own == nil || sh == nil || own.Error() != sh.Error() {
			t.Errorf("window %d over %v: own window %v, shared %v: want the same error", w.buckets, w.interval, own, sh)
		}
	}
	c, err := NewCircuit(ErrorRatio(0.5), shared())
	if err != nil || c.stats.Load() != nil {
		t.Fatalf("a shared circuit with the default window: %v, own window %v; want no error and none", err, c.stats.Load())
	}
}
