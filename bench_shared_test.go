package slidegate

import (
	"errors"
	"testing"
)

// One request in four fails: the breaker, of an error ratio of 0.5, reads
// its counts at each failure and stays closed.
func BenchmarkEnterExitQPSAndBreakerSomeFail(b *testing.B) {
	g := benchGuard(b)
	boom := errors.New("boom")
	for i := 0; i < b.N; i++ {
		e, _ := g.Enter(bg, "a")
		if i%4 == 3 {
			e.Exit(boom)
		} else {
			e.Exit(nil)
		}
	}
}
