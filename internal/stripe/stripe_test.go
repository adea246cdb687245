package stripe

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
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

func TestWordsAreAlignedAndAlone(t *testing.T) {
	lines := func(w []atomic.Uint64) (first, last uintptr) { // the 128-byte lines w touches
		return uintptr(unsafe.Pointer(&w[0])) / 128, (uintptr(unsafe.Pointer(&w[len(w)-1])) + 7) / 128
	}
	for n := 1; n < 100; n++ {
		a, b := Words(n), Words(n) // side by side, as a structure's stripes are made
		if len(a) != n || cap(a) != n {
			t.Fatalf("Words(%d): len %d cap %d", n, len(a), cap(a))
		}
		if off := uintptr(unsafe.Pointer(&a[0])) % 128; off != 0 {
			t.Fatalf("Words(%d) starts %d bytes past a 128-byte boundary", n, off)
		}
		a0, a1 := lines(a)
		b0, b1 := lines(b)
		if a0 <= b1 && b0 <= a1 {
			t.Fatalf("Words(%d) twice: lines %d-%d and %d-%d overlap", n, a0, a1, b0, b1)
		}
	}
}
