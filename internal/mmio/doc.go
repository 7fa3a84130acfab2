// Package mmio holds the memory barriers and device-register stores a
// user-space RDMA datapath needs, with the semantics of rdma-core's
// util/udma_barrier.h and util/mmio.h: neither stronger nor weaker than
// rdma-core's on the same CPU.
//
//	function              rdma-core                      amd64            arm64
//	ToDevice              udma_to_device_barrier         compiler only    DMB OSHST
//	FromDevice            udma_from_device_barrier       LFENCE           DMB OSHLD
//	OrderingWrite         udma_ordering_write_barrier    compiler only    DMB OSHST
//	FlushWrites           mmio_flush_writes              SFENCE           DSB ST
//	WCStart               mmio_wc_start                  SFENCE           DSB ST
//	Store32/Store64       mmio_write32_be/mmio_write64_be (the caller swaps)
//	Copy64                mmio_memcpy_x64 (one 64-byte chunk)
//
// A call to any of these is also a compiler barrier: the Go compiler neither
// inlines assembly nor moves memory accesses across a call it cannot see into.
//
// Stores to device pages (UAR, BlueFlame) are plain stores of exactly the
// stated width and never read the destination: sync/atomic would use XCHG
// on amd64, a locked read-modify-write of device memory.
//
// Only amd64 and arm64 have an implementation correct for device memory
// (Supported is true). Elsewhere the functions are built from sync/atomic,
// which orders CPU-visible memory only: good enough for tests that stand
// plain memory in for a device, not for hardware, so providers must refuse
// to run against a device when Supported is false.
//
// Every function is safe to call concurrently; concurrent stores to the same
// device register are the caller's problem, as in rdma-core.
package mmio
