package mlx5

import "unsafe"

// testLocal stands in for uverbs.PD.SGEBytes in tests that build queues
// without a kernel or a PD: every address is taken as registered memory
// (the tests own the memory their SGEs name). Production queues get the
// PD's lookup in Created, which refuses unregistered ranges.
func testLocal(_ uint32, addr uint64, n int) []byte {
	if n == 0 {
		return nil
	}
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), n)
}
