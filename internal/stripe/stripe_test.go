package stripe

import (
	"runtime"
	"sync"
	"testing"
)

func TestHintIsAProcessorIndex(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	errs := make(chan int, 64)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				if h := Hint(); h < 0 || h >= procs {
					errs <- h
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for h := range errs {
		t.Errorf("Hint() = %d, want in [0, %d)", h, procs)
	}
}

func TestCountIsAPowerOfTwoCoveringTheProcessors(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, tc := range []struct{ procs, want int }{
		{1, 2}, {2, 2}, {3, 4}, {4, 4}, {5, 8}, {33, 64}, {64, 64}, {200, Max},
	} {
		runtime.GOMAXPROCS(tc.procs)
		if got := Count(); got != tc.want {
			t.Errorf("GOMAXPROCS %d: Count() = %d, want %d", tc.procs, got, tc.want)
		}
	}
}

func BenchmarkHint(b *testing.B) {
	s := 0
	for range b.N {
		s += Hint()
	}
	_ = s
}
