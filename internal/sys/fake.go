package sys

import (
	"errors"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FakeKernel answers in place of the kernel for the files it claims, so
// tests can run a provider's real control and data path with no device
// (mlx5's fake-kernel tests). It sees exactly what the kernel would: the
// raw ioctl argument and write(2) bytes, and it returns the memory an mmap
// would map. It is test-only: InstallFakeKernel refuses to install it
// outside a test binary.
//
// A claimed path is opened for real on /dev/null, so the FD holds a real
// descriptor that Close, Dup and the poller handle as usual; the fake keys
// its state by that number and hears Closed before the number is reused.
// Descriptors it did not claim go to the kernel. Only Open, Close, Ioctl,
// Write and Mmap consult it: Read, Dup, the poller and the netlink calls
// see the /dev/null descriptor (uverbs needs none of them on a claimed
// file; the async event file a fake hands out should be a real pipe).
//
// Importing testing here costs production binaries about 20 KB (the linker
// keeps testing.Testing and little else; its flags are registered only by
// testing.Init, which a non-test binary never calls).
type FakeKernel interface {
	// Claims reports whether Open(path) is the fake's.
	Claims(path string) bool
	// Opened tells the fake the descriptor number of a claimed path.
	Opened(path string, raw int)
	// Closed tells the fake raw is being closed.
	Closed(raw int)
	// Ioctl, Write and Mmap answer for raw when handled is true.
	Ioctl(raw int, req uintptr, arg unsafe.Pointer) (handled bool, err error)
	Write(raw int, b []byte) (handled bool, err error)
	Mmap(raw int, offset int64, length int, prot, flags int) (b []byte, handled bool, err error)
}

// fake is nil in production. Open, Close, Ioctl, Write and Mmap consult it
// with one load and a predictable branch: nothing measurable next to a
// system call (rxe's POST_SEND doorbell is one).
//
// It is a plain variable, not atomic: it is set and cleared only while no
// other goroutine is inside this package (before a test starts the code
// under test and after that code is done).
var (
	fake   FakeKernel
	fakeMu sync.Mutex
)

// ErrNotTestBinary is InstallFakeKernel's answer outside a test binary.
var ErrNotTestBinary = errors.New("sys: a fake kernel can only be installed in a test binary")

// InstallFakeKernel routes the files k claims to k until restore is called.
// It refuses outside a test binary (testing.Testing), so a production
// program cannot enable it by accident, and refuses a second fake.
func InstallFakeKernel(k FakeKernel) (restore func(), err error) {
	if !testing.Testing() {
		return nil, ErrNotTestBinary
	}
	if k == nil {
		return nil, errors.New("sys: nil fake kernel")
	}
	fakeMu.Lock()
	defer fakeMu.Unlock()
	if fake != nil {
		return nil, errors.New("sys: a fake kernel is already installed")
	}
	fake = k
	return func() {
		fakeMu.Lock()
		defer fakeMu.Unlock()
		fake = nil
	}, nil
}

// fakeOpen opens a claimed path on /dev/null and hands the number to k.
func fakeOpen(k FakeKernel, path string, flags int) (*FD, error) {
	raw, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, errnoErr(err)
	}
	k.Opened(path, raw)
	return NewFD(raw), nil
}
