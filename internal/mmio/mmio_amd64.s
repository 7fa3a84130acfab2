#include "textflag.h"

// x86-64 is TSO: stores to WB memory are not reordered with each other, so
// udma_to_device_barrier is only a compiler barrier (the call itself).
TEXT ·ToDevice(SB),NOSPLIT|NOFRAME,$0-0
	RET

TEXT ·OrderingWrite(SB),NOSPLIT|NOFRAME,$0-0
	RET

// udma_from_device_barrier: asm volatile("lfence" ::: "memory").
TEXT ·FromDevice(SB),NOSPLIT|NOFRAME,$0-0
	LFENCE
	RET

// mmio_flush_writes: asm volatile("sfence" ::: "memory") drains the WC buffers.
TEXT ·FlushWrites(SB),NOSPLIT|NOFRAME,$0-0
	SFENCE
	RET

// mmio_wc_start is mmio_flush_writes on x86-64.
TEXT ·WCStart(SB),NOSPLIT|NOFRAME,$0-0
	SFENCE
	RET

// func Store32(p unsafe.Pointer, v uint32)
TEXT ·Store32(SB),NOSPLIT,$0-12
	MOVQ	p+0(FP), AX
	MOVL	v+8(FP), BX
	MOVL	BX, (AX)
	RET

// func Store64(p unsafe.Pointer, v uint64)
TEXT ·Store64(SB),NOSPLIT,$0-16
	MOVQ	p+0(FP), AX
	MOVQ	v+8(FP), BX
	MOVQ	BX, (AX)
	RET

// func Copy64(dst, src unsafe.Pointer)
// Eight ordered 64-bit stores, ascending, as rdma-core's x86-64
// mmio_memcpy_x64 does; loads all first so the stores issue back to back
// and fill one write-combining buffer.
TEXT ·Copy64(SB),NOSPLIT,$0-16
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	0(SI), AX
	MOVQ	8(SI), BX
	MOVQ	16(SI), CX
	MOVQ	24(SI), DX
	MOVQ	32(SI), R8
	MOVQ	40(SI), R9
	MOVQ	48(SI), R10
	MOVQ	56(SI), R11
	MOVQ	AX, 0(DI)
	MOVQ	BX, 8(DI)
	MOVQ	CX, 16(DI)
	MOVQ	DX, 24(DI)
	MOVQ	R8, 32(DI)
	MOVQ	R9, 40(DI)
	MOVQ	R10, 48(DI)
	MOVQ	R11, 56(DI)
	RET

// func StoreRelease32(p unsafe.Pointer, v uint32)
// A store-release to ordinary (write-back, shared) memory: on x86-64 (TSO)
// a plain MOV, as C11 atomic_store_explicit(memory_order_release) compiles;
// the call keeps the Go compiler from moving earlier stores after it.
// sync/atomic's Store is an XCHG, a full barrier that stalls the core.
TEXT ·StoreRelease32(SB),NOSPLIT,$0-12
	MOVQ	p+0(FP), AX
	MOVL	v+8(FP), BX
	MOVL	BX, (AX)
	RET

// func StoreRelease64(p unsafe.Pointer, v uint64)
TEXT ·StoreRelease64(SB),NOSPLIT,$0-16
	MOVQ	p+0(FP), AX
	MOVQ	v+8(FP), BX
	MOVQ	BX, (AX)
	RET
