//go:build !amd64 && !arm64

package mmio

import (
	"sync/atomic"
	"unsafe"
)

// Supported is false: nothing here is known to order stores to device
// memory on this architecture (sync/atomic orders CPU-visible memory only).
const Supported = false

var fence atomic.Uint32

// Each barrier is a sequentially consistent atomic, which orders the
// surrounding plain accesses for other CPUs (the Go memory model), i.e. for
// a software device model in plain memory.
func ToDevice()      { fence.Add(1) }
func FromDevice()    { fence.Load() }
func OrderingWrite() { fence.Add(1) }
func FlushWrites()   { fence.Add(1) }
func WCStart()       { fence.Add(1) }

func Store32(p unsafe.Pointer, v uint32) { atomic.StoreUint32((*uint32)(p), v) }
func Store64(p unsafe.Pointer, v uint64) { atomic.StoreUint64((*uint64)(p), v) }

func Copy64(dst, src unsafe.Pointer) {
	d := (*[8]uint64)(dst)
	s := (*[8]uint64)(src)
	for i := range d {
		atomic.StoreUint64(&d[i], s[i])
	}
}

func StoreRelease32(p unsafe.Pointer, v uint32) { atomic.StoreUint32((*uint32)(p), v) }
func StoreRelease64(p unsafe.Pointer, v uint64) { atomic.StoreUint64((*uint64)(p), v) }
