package mmio

import (
	"sync/atomic"
	"testing"
	"unsafe"
)

// The release stores write exactly their width, and publish what was
// written before them: a reader that sees the flag sees the data (message
// passing, the pattern of every Aeron frame and counter).
func TestStoreRelease(t *testing.T) {
	var buf [3]uint64
	buf[0], buf[2] = ^uint64(0), ^uint64(0)
	StoreRelease64(unsafe.Pointer(&buf[1]), 0x0102030405060708)
	if buf != [3]uint64{^uint64(0), 0x0102030405060708, ^uint64(0)} {
		t.Fatalf("StoreRelease64 wrote %x", buf)
	}
	var w [2]uint32
	w[1] = 7
	StoreRelease32(unsafe.Pointer(&w[0]), 0x11223344)
	if w != [2]uint32{0x11223344, 7} {
		t.Fatalf("StoreRelease32 wrote %x", w)
	}

	type slot struct {
		data [7]uint64
		flag uint32
	}
	var s slot
	const rounds = 200000
	done := make(chan string, 1)
	go func() {
		for f := uint32(0); f < rounds; {
			f = atomic.LoadUint32(&s.flag)
			for j := range s.data {
				if v := atomic.LoadUint64(&s.data[j]); v < uint64(f) {
					done <- "reader saw the flag before the data"
					return
				}
			}
		}
		done <- ""
	}()
	for i := uint32(1); i <= rounds; i++ {
		for j := range s.data {
			atomic.StoreUint64(&s.data[j], uint64(i)) // not reordered after the release below
		}
		StoreRelease32(unsafe.Pointer(&s.flag), i)
	}
	if msg := <-done; msg != "" {
		t.Fatal(msg)
	}
}
