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
	missLoop(b, unsafe.Slice((*uint64)(unsafe.Pointer(&m[at])), size/8))
}
