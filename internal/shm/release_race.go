//go:build race

package shm

import (
	"sync/atomic"
	"unsafe"
)

// Under the race detector the release stores are sync/atomic's, which it
// understands as synchronisation (it cannot see assembly stores).

func storeRelease32(p unsafe.Pointer, v int32) { atomic.StoreInt32((*int32)(p), v) }
func storeRelease64(p unsafe.Pointer, v int64) { atomic.StoreInt64((*int64)(p), v) }

// StoreRelease is a store-release to a 64-bit counter (Aeron's
// aeron_counter_set_release).
func StoreRelease(v *atomic.Int64, x int64) { v.Store(x) }
