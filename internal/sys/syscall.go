package sys

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Ioctl issues ioctl(fd, req, arg), retrying EINTR. arg must point to memory
// that stays valid for the call; memory it points to in turn (attribute
// payloads, response buffers) must not be Go-stack memory: use an Arena.
func Ioctl(fd *FD, req uintptr, arg unsafe.Pointer) error {
	return fd.use(func(raw int) error {
		for {
			_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(raw), req, uintptr(arg))
			if e == unix.EINTR {
				continue
			}
			runtime.KeepAlive(arg)
			return NewErrno(e)
		}
	})
}

// Write issues one write(2) of buf, retrying EINTR. A short write is reported
// as an error (uverbs and rdma_cm commands are all-or-nothing).
func Write(fd *FD, buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	return fd.use(func(raw int) error { return write(unix.Syscall, raw, buf) })
}

// WriteRaw is Write for commands the kernel finishes without sleeping, on
// the datapath: the rxe POST_SEND doorbell. It enters the kernel with
// RawSyscall, so the runtime does not treat the thread as blocked: the
// scheduler's monitor would otherwise hand this thread's P to another thread
// whenever the kernel spends more than 20 µs sending, and wake threads that
// compete with the kernel's own RDMA work for the CPU.
func WriteRaw(fd *FD, buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	fd.mu.RLock()
	defer fd.mu.RUnlock()
	if fd.raw < 0 {
		return NewErrno(unix.EBADF)
	}
	return write(unix.RawSyscall, fd.raw, buf)
}

// write issues write(2) through sc, retrying EINTR; a short write is EIO.
func write(sc func(trap, a1, a2, a3 uintptr) (uintptr, uintptr, unix.Errno), raw int, buf []byte) error {
	for {
		n, _, e := sc(unix.SYS_WRITE, uintptr(raw), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
		if e == unix.EINTR {
			continue
		}
		runtime.KeepAlive(buf)
		if e != 0 {
			return NewErrno(e)
		}
		if int(n) != len(buf) {
			return NewErrno(unix.EIO)
		}
		return nil
	}
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
			if err != nil {
				return NewErrno(err.(unix.Errno))
			}
			return nil
		}
	})
	return n, err
}

// Protection and flags for Mmap of a device's shared queues (providers may
// not import golang.org/x/sys/unix).
const (
	ProtReadWrite = unix.PROT_READ | unix.PROT_WRITE
	MapShared     = unix.MAP_SHARED
)

// Mmap maps length bytes of fd at offset.
func Mmap(fd *FD, offset int64, length int, prot, flags int) ([]byte, error) {
	var b []byte
	err := fd.use(func(raw int) error {
		var err error
		b, err = unix.Mmap(raw, offset, length, prot, flags)
		if err != nil {
			return NewErrno(err.(unix.Errno))
		}
		return nil
	})
	return b, err
}

// MmapAnon maps length bytes of private anonymous memory (page aligned, zeroed).
// extraFlags may add MAP_HUGETLB, MAP_POPULATE.
func MmapAnon(length int, extraFlags int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|extraFlags)
	if err != nil {
		return nil, NewErrno(err.(unix.Errno))
	}
	return b, nil
}

// Munmap unmaps a mapping made by Mmap or MmapAnon.
func Munmap(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if err := unix.Munmap(b); err != nil {
		return NewErrno(err.(unix.Errno))
	}
	return nil
}

// Madvise applies advice to b.
func Madvise(b []byte, advice int) error {
	if err := unix.Madvise(b, advice); err != nil {
		return NewErrno(err.(unix.Errno))
	}
	return nil
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

// BytesAt returns the n bytes at address addr. It exists for datapaths that
// must read memory named by an address in a work request (inline sends):
// addr must point into a live mapping the caller registered (an MR), which the
// Go runtime does not manage.
func BytesAt(addr uint64, n int) []byte {
	if n == 0 {
		return nil
	}
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), n)
}
