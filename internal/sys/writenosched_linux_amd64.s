#include "textflag.h"

// func writeNoSched(fd uintptr, p unsafe.Pointer, n uintptr) (r, errno uintptr)
//
// write(2) straight from the calling thread, as syscall.RawSyscall does but
// without its three call levels: the rxe doorbell rings once per post.
// An error comes back in AX as -errno; as in Go's own syscall stubs,
// anything above -4095 (unsigned: from 0xfffffffffffff001) is one.
TEXT ·writeNoSched(SB), NOSPLIT, $0-40
	MOVQ	fd+0(FP), DI
	MOVQ	p+8(FP), SI
	MOVQ	n+16(FP), DX
	MOVQ	$1, AX // SYS_write
	SYSCALL
	CMPQ	AX, $0xfffffffffffff001
	JLS	ok
	MOVQ	$-1, r+24(FP)
	NEGQ	AX
	MOVQ	AX, errno+32(FP)
	RET
ok:
	MOVQ	AX, r+24(FP)
	MOVQ	$0, errno+32(FP)
	RET
