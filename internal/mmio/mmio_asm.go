//go:build amd64 || arm64

package mmio

import "unsafe"

// Supported reports whether these barriers and stores are correct for
// device memory on this architecture.
const Supported = true

// ToDevice orders the CPU's earlier stores to DMA-visible memory before its
// later stores (to memory or to a device register), as seen by the device:
// rdma-core udma_to_device_barrier.
//
//go:noescape
func ToDevice()

// FromDevice orders an earlier read of DMA memory the device wrote (say a
// CQE's owner bit) before later reads of it: rdma-core
// udma_from_device_barrier.
//
//go:noescape
func FromDevice()

// OrderingWrite orders DMA-memory stores among themselves as the device
// sees them: rdma-core udma_ordering_write_barrier.
//
//go:noescape
func OrderingWrite()

// FlushWrites makes earlier stores to write-combining device memory leave
// the CPU before any later store: rdma-core mmio_flush_writes.
//
//go:noescape
func FlushWrites()

// WCStart begins a write-combining burst after earlier DMA-memory stores:
// rdma-core mmio_wc_start.
//
//go:noescape
func WCStart()

// Store32 stores v to the device address p with one 32-bit store.
//
//go:noescape
func Store32(p unsafe.Pointer, v uint32)

// Store64 stores v to the device address p with one 64-bit store.
//
//go:noescape
func Store64(p unsafe.Pointer, v uint64)

// Copy64 copies the 64 bytes at src to the device address dst in ascending
// order with stores of at least 64 bits and no reads of dst: one chunk of
// rdma-core mmio_memcpy_x64 (the BlueFlame copy). Both must be 8-byte
// aligned (16 on arm64).
//
//go:noescape
func Copy64(dst, src unsafe.Pointer)

// StoreRelease32 is a store-release of v to ordinary shared memory at p
// (C11 memory_order_release; Aeron's AERON_SET_RELEASE): earlier loads and
// stores become visible before it, and it costs a plain store on x86-64,
// where sync/atomic's sequentially consistent Store is a locked XCHG. p
// must be 4-byte aligned. The race detector does not see it: callers use
// sync/atomic in race builds.
//
//go:noescape
func StoreRelease32(p unsafe.Pointer, v uint32)

// StoreRelease64 is StoreRelease32 for 64 bits (8-byte aligned p).
//
//go:noescape
func StoreRelease64(p unsafe.Pointer, v uint64)
