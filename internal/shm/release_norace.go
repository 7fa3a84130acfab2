//go:build !race

package shm

import (
	"sync/atomic"
	"unsafe"

	"github.com/ibgo/ibgo/internal/mmio"
)

func storeRelease32(p unsafe.Pointer, v int32) { mmio.StoreRelease32(p, uint32(v)) }
func storeRelease64(p unsafe.Pointer, v int64) { mmio.StoreRelease64(p, uint64(v)) }

// StoreRelease is a store-release to a 64-bit counter (Aeron's
// aeron_counter_set_release), cheaper than v.Store on x86-64.
func StoreRelease(v *atomic.Int64, x int64) { mmio.StoreRelease64(unsafe.Pointer(v), uint64(x)) }
