package shm

import "unsafe"

// SameStart reports whether a and b begin at the same byte of memory (a
// datagram handed up as a slice of the buffer it would be copied into).
func SameStart(a, b []byte) bool {
	return len(a) > 0 && len(b) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// Within reports whether inner lies entirely inside outer's memory.
func Within(outer, inner []byte) bool {
	if len(outer) == 0 || len(inner) == 0 {
		return false
	}
	o, i := uintptr(unsafe.Pointer(unsafe.SliceData(outer))), uintptr(unsafe.Pointer(unsafe.SliceData(inner)))
	return i >= o && i+uintptr(len(inner)) <= o+uintptr(len(outer))
}
