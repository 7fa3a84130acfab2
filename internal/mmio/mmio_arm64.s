#include "textflag.h"

// DMB/DSB option encodings (CRm): OSHLD=1, OSHST=2, ST=14 (full system, stores).

// udma_to_device_barrier: asm volatile("dmb oshst" ::: "memory").
TEXT ·ToDevice(SB),NOSPLIT|NOFRAME,$0-0
	DMB	$2
	RET

// udma_ordering_write_barrier is udma_to_device_barrier on aarch64.
TEXT ·OrderingWrite(SB),NOSPLIT|NOFRAME,$0-0
	DMB	$2
	RET

// udma_from_device_barrier: asm volatile("dmb oshld" ::: "memory").
TEXT ·FromDevice(SB),NOSPLIT|NOFRAME,$0-0
	DMB	$1
	RET

// mmio_flush_writes: asm volatile("dsb st" ::: "memory").
TEXT ·FlushWrites(SB),NOSPLIT|NOFRAME,$0-0
	DSB	$14
	RET

// mmio_wc_start is mmio_flush_writes on aarch64.
TEXT ·WCStart(SB),NOSPLIT|NOFRAME,$0-0
	DSB	$14
	RET

// func Store32(p unsafe.Pointer, v uint32)
TEXT ·Store32(SB),NOSPLIT,$0-12
	MOVD	p+0(FP), R0
	MOVWU	v+8(FP), R1
	MOVW	R1, (R0)
	RET

// func Store64(p unsafe.Pointer, v uint64)
TEXT ·Store64(SB),NOSPLIT,$0-16
	MOVD	p+0(FP), R0
	MOVD	v+8(FP), R1
	MOVD	R1, (R0)
	RET

// func Copy64(dst, src unsafe.Pointer)
// rdma-core's aarch64 mmio_memcpy_x64 loads and stores 64 bytes with NEON
// (vld4q/vst4q, which together copy bytes unchanged); a 4-register ST1 is
// the same 64 bytes in one store instruction.
TEXT ·Copy64(SB),NOSPLIT,$0-16
	MOVD	dst+0(FP), R0
	MOVD	src+8(FP), R1
	VLD1	(R1), [V0.D2, V1.D2, V2.D2, V3.D2]
	VST1	[V0.D2, V1.D2, V2.D2, V3.D2], (R0)
	RET

// func StoreRelease32(p unsafe.Pointer, v uint32)
// A store-release to ordinary memory: STLR, as C11
// atomic_store_explicit(memory_order_release) compiles on aarch64.
TEXT ·StoreRelease32(SB),NOSPLIT,$0-12
	MOVD	p+0(FP), R0
	MOVWU	v+8(FP), R1
	STLRW	R1, (R0)
	RET

// func StoreRelease64(p unsafe.Pointer, v uint64)
TEXT ·StoreRelease64(SB),NOSPLIT,$0-16
	MOVD	p+0(FP), R0
	MOVD	v+8(FP), R1
	STLR	R1, (R0)
	RET
