package sys

import "unsafe"

// writeNoSched is write(2) without the runtime's syscall bookkeeping
// (writenosched_linux_amd64.s). p must stay valid for the call; an assembly
// function's pointer argument is live across it.
//
//go:noescape
func writeNoSched(fd uintptr, p unsafe.Pointer, n uintptr) (r, errno uintptr)
