package flow

import (
	"syscall"
	"testing"
	"unsafe"
)

// BenchmarkBaselineMissHugePages is BenchmarkBaselineMiss over 24 MiB
// mapped apart from the heap and advised to the kernel as huge pages
// (madvise MADV_HUGEPAGE), which it backs with pages of 2 MiB where
// transparent huge pages are not off: the part of a miss that finding the
// page costs (a TLB miss) is then nearly gone. The heap, and so a
// sketch, has them only where the kernel gives them unasked
// (transparent_hugepage "always").
func BenchmarkBaselineMissHugePages(b *testing.B) {
	const size, huge = 24 << 20, 2 << 20
	m, err := syscall.Mmap(-1, 0, size+huge, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		b.Skip("no anonymous mapping:", err)
	}
	defer syscall.Munmap(m)
	at := (huge - uintptr(unsafe.Pointer(&m[0]))%huge) % huge
	if err := syscall.Madvise(m[at:at+size], syscall.MADV_HUGEPAGE); err != nil {
		b.Skip("no huge pages:", err)
	}
	s := unsafe.Slice((*uint64)(unsafe.Pointer(&m[at])), size/8)
	for i := range s {
		s[i] = uint64(i)
	}
	lines := uint64(len(s) / 8)
	x := uint64(1)
	for b.Loop() {
		x = x*0x9E3779B97F4A7C15 + s[(x>>32)*lines>>32*8]&1
	}
	sinkMiss = x
}
