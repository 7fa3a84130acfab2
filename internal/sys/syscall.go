package sys

import (
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Ioctl issues ioctl(fd, req, arg), retrying EINTR. arg must point to memory
// that stays valid for the call; memory it points to in turn (attribute
// payloads, response buffers) must not be Go-stack memory: use an Arena.
func Ioctl(fd *FD, req uintptr, arg unsafe.Pointer) error {
	fd.mu.RLock()
	defer fd.mu.RUnlock()
	if fd.raw < 0 {
		return NewErrno(EBADF)
	}
	if k := fake; k != nil {
		if ok, err := k.Ioctl(fd.raw, req, arg); ok {
			return err
		}
	}
	for {
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd.raw), req, uintptr(arg))
		if e == unix.EINTR {
			continue
		}
		runtime.KeepAlive(arg)
		return NewErrno(e)
	}
}

// Write issues one write(2) of b, retrying EINTR. A short write is reported
// as EIO (uverbs and rdma_cm commands are all-or-nothing).
func Write(fd *FD, b Buf) error { return write(fd, b, false) }

// WriteRaw is Write for the one datapath command that needs it: the rxe
// POST_SEND doorbell. It enters the kernel as RawSyscall does, without the
// runtime's system-call bookkeeping, so the runtime does not treat the
// thread as blocked: with Syscall, the scheduler's
// monitor hands the thread's P to another thread whenever the kernel spends
// more than 20 us in the call (rxe on 6.1 runs the requester inline, so a
// doorbell for a batch of work requests often does), and the returning
// thread then waits to get a P back. The cost is that a doorbell the kernel
// makes sleep (its GFP_KERNEL copy of the request, under memory pressure)
// holds its P meanwhile; see rxe's ringDoorbell for the measurements that
// decided it.
//
// It is the doorbell's hot path, so it is lean: one read lock of the fd and
// write(2) issued directly (writeNoSched: a few instructions of assembly on
// linux/amd64, RawSyscall elsewhere), no deferred call. A closed fd and the
// test fake take write's general path.
func WriteRaw(fd *FD, b Buf) error {
	if len(b.b) == 0 {
		return nil
	}
	fd.mu.RLock()
	if fd.raw < 0 || fake != nil {
		fd.mu.RUnlock()
		return write(fd, b, true)
	}
	for {
		n, e := writeNoSched(uintptr(fd.raw), unsafe.Pointer(&b.b[0]), uintptr(len(b.b)))
		if syscall.Errno(e) == unix.EINTR {
			continue
		}
		fd.mu.RUnlock()
		return writeResult(n, syscall.Errno(e), len(b.b))
	}
}

func write(fd *FD, b Buf, raw bool) error {
	if len(b.b) == 0 {
		return nil
	}
	fd.mu.RLock()
	defer fd.mu.RUnlock()
	if fd.raw < 0 {
		return NewErrno(EBADF)
	}
	if k := fake; k != nil {
		if ok, err := k.Write(fd.raw, b.b); ok {
			return err
		}
	}
	for {
		// The pointer becomes a uintptr in the call expression itself, the
		// one form the unsafe.Pointer rules keep alive for a syscall (never
		// through a function value: defect 8).
		var n uintptr
		var e syscall.Errno
		if raw {
			n, _, e = unix.RawSyscall(unix.SYS_WRITE, uintptr(fd.raw), uintptr(unsafe.Pointer(&b.b[0])), uintptr(len(b.b)))
		} else {
			n, _, e = unix.Syscall(unix.SYS_WRITE, uintptr(fd.raw), uintptr(unsafe.Pointer(&b.b[0])), uintptr(len(b.b)))
		}
		if e == unix.EINTR {
			continue
		}
		return writeResult(n, e, len(b.b))
	}
}

func writeResult(n uintptr, e syscall.Errno, want int) error {
	if e != 0 {
		return NewErrno(e)
	}
	if int(n) != want {
		return NewErrno(EIO)
	}
	return nil
}

// Read issues one read(2), retrying EINTR.
func Read(fd *FD, buf []byte) (int, error) {
	var n int
	err := fd.use(func(raw int) error {
		for {
			var err error
			n, err = unix.Read(raw, buf)
			if err == unix.EINTR {
				continue
			}
			return errnoErr(err)
		}
	})
	return n, err
}

// Protection and mapping flags for Mmap (the values of <sys/mman.h>).
const (
	PROT_READ  = unix.PROT_READ
	PROT_WRITE = unix.PROT_WRITE
	MAP_SHARED = unix.MAP_SHARED
)

// Mmap maps length bytes of fd at offset.
func Mmap(fd *FD, offset int64, length int, prot, flags int) ([]byte, error) {
	var b []byte
	err := fd.use(func(raw int) error {
		if k := fake; k != nil {
			fb, ok, err := k.Mmap(raw, offset, length, prot, flags)
			if ok {
				b = fb
				return err
			}
		}
		var err error
		b, err = unix.Mmap(raw, offset, length, prot, flags)
		return errnoErr(err)
	})
	return b, err
}

// MapFile maps the first length bytes of f with MAP_SHARED, read-only or
// writable. The descriptor is used through f's RawConn, so f stays in the
// mode it is in (f.Fd would make it blocking).
func MapFile(f *os.File, length int, writable bool) ([]byte, error) {
	prot := unix.PROT_READ
	if writable {
		prot |= unix.PROT_WRITE
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var b []byte
	var merr error
	if err := rc.Control(func(fd uintptr) {
		b, merr = unix.Mmap(int(fd), 0, length, prot, unix.MAP_SHARED)
	}); err != nil {
		return nil, err
	}
	return b, errnoErr(merr)
}

// MmapAnon maps length bytes of private anonymous memory (page aligned, zeroed).
// extraFlags may add MapHugeTLB, MapPopulate.
func MmapAnon(length int, extraFlags int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON|extraFlags)
	if err != nil {
		return nil, errnoErr(err)
	}
	return b, nil
}

// Munmap unmaps a mapping made by Mmap, MapFile or MmapAnon.
func Munmap(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return errnoErr(unix.Munmap(b))
}

// Addr returns the address of the first byte of b as a u64 for embedding in
// a kernel command. b must be mmap'd memory (an Arena or a mapping), never Go
// heap or stack memory: the kernel reads it after this function returns.
func Addr(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&b[0])))
}

// Pagesize is the system page size.
var Pagesize = unix.Getpagesize()
