package mlx5

import "unsafe"

// testLocal stands in for uverbs.PD.Registered in tests that build queues
// without a kernel or a PD: every range is taken as registered memory of
// its own (the tests own the memory their SGEs name). Production queues get
// the PD's lookup in Created, which refuses unregistered ranges.
func testLocal(_ uint32, addr uint64, n int) (uint64, []byte) {
	if n == 0 {
		return 0, nil
	}
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return addr, unsafe.Slice((*byte)(p), n)
}

// regLocal is a localFn under which mems are the only registered memory,
// mems[i] under lkey i+1.
func regLocal(mems ...[]byte) localFn {
	return func(lkey uint32, addr uint64, n int) (uint64, []byte) {
		if lkey == 0 || int(lkey) > len(mems) {
			return 0, nil
		}
		mem := mems[lkey-1]
		base := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mem))))
		if addr < base || addr+uint64(n) > base+uint64(len(mem)) {
			return 0, nil
		}
		return base, mem
	}
}
