//go:build !linux

package sys

import "os"

// RDMA is Linux only: elsewhere these compile and fail at run time with
// ErrNotSupportedOnOS.

const (
	MapHugeTLB  = 0
	MapPopulate = 0
	CapIPCLock  = 14
)

func DontFork(b []byte) error { return ErrNotSupportedOnOS }

func PopulateWrite(b []byte) (supported bool, err error) { return false, nil }

func MemlockLimit() (limit uint64, unlimited bool, err error) { return 0, false, ErrNotSupportedOnOS }

func HugePageSize() (int, error) { return 0, ErrNotSupportedOnOS }

func NetlinkRDMA() (*FD, error) { return nil, ErrNotSupportedOnOS }

func NetlinkUevent() (*FD, error) { return nil, ErrNotSupportedOnOS }

func NetlinkSend(fd *FD, b []byte) error { return ErrNotSupportedOnOS }

func NetlinkRecv(fd *FD, b []byte) (int, error) { return 0, ErrNotSupportedOnOS }

// UsableSpace is not measured off Linux; callers skip their storage checks.
func UsableSpace(path string) (uint64, error) { return 0, ErrNotSupportedOnOS }

// Allocate is a no-op where fallocate(2) does not exist: the file stays
// sparse.
func Allocate(f *os.File, size int64) error { return nil }
