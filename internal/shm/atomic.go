package shm

import (
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"
)

// check panics unless b[off:off+size] is in range and its address is
// size-aligned. Unaligned atomics fault on arm64 and are not atomic on amd64
// across cache lines, so alignment is part of the contract.
func check(b []byte, off, size int) unsafe.Pointer {
	if off < 0 || off > len(b)-size {
		panic(fmt.Sprintf("shm: %d-byte access at offset %d outside buffer of %d bytes", size, off, len(b)))
	}
	p := unsafe.Pointer(unsafe.SliceData(b[off:]))
	if uintptr(p)&uintptr(size-1) != 0 {
		panic(fmt.Sprintf("shm: %d-byte access at offset %d is not %d-byte aligned", size, off, size))
	}
	return p
}

// Int32At returns a typed atomic view of the int32 at b[off:off+4].
func Int32At(b []byte, off int) *atomic.Int32 { return (*atomic.Int32)(check(b, off, 4)) }

// Int64At returns a typed atomic view of the int64 at b[off:off+8].
func Int64At(b []byte, off int) *atomic.Int64 { return (*atomic.Int64)(check(b, off, 8)) }

// LoadInt32 is a load-acquire of the int32 at off.
func LoadInt32(b []byte, off int) int32 { return atomic.LoadInt32((*int32)(check(b, off, 4))) }

// StoreInt32 is a store-release of the int32 at off.
func StoreInt32(b []byte, off int, v int32) { storeRelease32(check(b, off, 4), v) }

// AddInt32 atomically adds delta to the int32 at off and returns the new value.
func AddInt32(b []byte, off int, delta int32) int32 {
	return atomic.AddInt32((*int32)(check(b, off, 4)), delta)
}

// CompareAndSwapInt32 is an atomic compare-and-set of the int32 at off.
func CompareAndSwapInt32(b []byte, off int, old, new int32) bool {
	return atomic.CompareAndSwapInt32((*int32)(check(b, off, 4)), old, new)
}

// LoadInt64 is a load-acquire of the int64 at off.
func LoadInt64(b []byte, off int) int64 { return atomic.LoadInt64((*int64)(check(b, off, 8))) }

// StoreInt64 is a store-release of the int64 at off.
func StoreInt64(b []byte, off int, v int64) { storeRelease64(check(b, off, 8), v) }

// AddInt64 atomically adds delta to the int64 at off and returns the new value.
func AddInt64(b []byte, off int, delta int64) int64 {
	return atomic.AddInt64((*int64)(check(b, off, 8)), delta)
}

// CompareAndSwapInt64 is an atomic compare-and-set of the int64 at off.
func CompareAndSwapInt64(b []byte, off int, old, new int64) bool {
	return atomic.CompareAndSwapInt64((*int64)(check(b, off, 8)), old, new)
}

// StoreBytes copies src into b at off with 8-byte atomic stores. off must be
// 8-byte aligned and b must have room for src rounded up to 8 bytes; the bytes
// of the last word beyond len(src) are written as zero. Words are composed
// little-endian, the byte order of Aeron's files and of every host ibgo runs on
// (amd64, arm64). It is for seqlock-style
// buffers (Aeron's broadcast buffer) where a reader may copy a record while
// the writer overwrites it and detects the overlap afterwards: with word
// atomics on both sides such a torn copy is not a data race.
func StoreBytes(b []byte, off int, src []byte) {
	n := len(src)
	words := (n + 7) / 8
	if words == 0 {
		return
	}
	base := check(b, off, 8)
	check(b, off+(words-1)*8, 8)
	for i := 0; i < words; i++ {
		var w uint64
		chunk := src[i*8 : min(n, i*8+8)]
		for j := len(chunk) - 1; j >= 0; j-- {
			w = w<<8 | uint64(chunk[j])
		}
		atomic.StoreUint64((*uint64)(unsafe.Add(base, i*8)), w)
	}
}

// LoadBytes fills dst from b at off with 8-byte atomic loads; the counterpart
// of StoreBytes. b must hold len(dst) rounded up to 8 bytes from off.
func LoadBytes(dst []byte, b []byte, off int) {
	n := len(dst)
	words := (n + 7) / 8
	if words == 0 {
		return
	}
	base := check(b, off, 8)
	check(b, off+(words-1)*8, 8)
	for i := 0; i < words; i++ {
		w := atomic.LoadUint64((*uint64)(unsafe.Add(base, i*8)))
		end := min(n, i*8+8)
		for j := i * 8; j < end; j++ {
			dst[j] = byte(w)
			w >>= 8
		}
	}
}

// Aligned reports whether the first byte of b is aligned to align bytes
// (a power of two). Callers check this once when they wrap a shared buffer.
func Aligned(b []byte, align int) bool {
	if len(b) == 0 {
		return true
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))&uintptr(align-1) == 0
}

// Alloc returns n zeroed bytes of Go heap memory aligned to 64 bytes (a cache
// line), for in-process buffers that are used with the atomics above: tests,
// and buffers that are not shared with other processes.
func Alloc(n int) []byte {
	if n <= 0 {
		return []byte{}
	}
	words := make([]uint64, (n+63)/8+8)
	p := unsafe.Pointer(unsafe.SliceData(words))
	skip := (64 - int(uintptr(p)&63)) & 63
	return unsafe.Slice((*byte)(unsafe.Add(p, skip)), n)
}

// preTouch writes every page of b once without changing it: a
// compare-and-swap of 0 with 0 on each page's first word (b is
// page-aligned, as a mapping is), which faults the page in writable.
func preTouch(b []byte) {
	page := os.Getpagesize()
	for off := 0; off+4 <= len(b); off += page {
		CompareAndSwapInt32(b, off, 0, 0)
	}
}
