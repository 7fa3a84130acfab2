//go:build !(linux && amd64)

package sys

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// writeNoSched is write(2) through RawSyscall where there is no assembly
// version (writenosched_linux_amd64.s).
func writeNoSched(fd uintptr, p unsafe.Pointer, n uintptr) (r, errno uintptr) {
	r, _, e := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(p), n)
	return r, uintptr(e)
}
