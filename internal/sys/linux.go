//go:build linux

package sys

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Extra MmapAnon flags.
const (
	MapHugeTLB  = unix.MAP_HUGETLB
	MapPopulate = unix.MAP_POPULATE
)

// DontFork marks b MADV_DONTFORK: a child does not inherit it, so a fork
// cannot leave the parent's DMA pages copy-on-write
// (rdma-core libibverbs/memory.c: ibv_fork_init).
func DontFork(b []byte) error { return errnoErr(unix.Madvise(b, unix.MADV_DONTFORK)) }

// PopulateWrite maps every page of b writable now (MADV_POPULATE_WRITE,
// Linux 5.14), as a write to each would, without writing: the page faults
// of a shared mapping's first touches are taken here at once instead of
// one by one in a hot loop. A kernel without it (EINVAL) reports
// supported false and no error.
func PopulateWrite(b []byte) (supported bool, err error) {
	err = unix.Madvise(b, unix.MADV_POPULATE_WRITE)
	if errors.Is(err, unix.EINVAL) {
		return false, nil
	}
	return true, errnoErr(err)
}

// MemlockLimit returns the RLIMIT_MEMLOCK soft limit; unlimited reports
// RLIM_INFINITY.
func MemlockLimit() (limit uint64, unlimited bool, err error) {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &r); err != nil {
		return 0, false, errnoErr(err)
	}
	return r.Cur, r.Cur == unix.RLIM_INFINITY, nil
}

// CapIPCLock is the capability that lifts RLIMIT_MEMLOCK (bit number in
// /proc/self/status CapEff).
const CapIPCLock = unix.CAP_IPC_LOCK

var (
	meminfoPath = "/proc/meminfo"
	hugeDir     = "/sys/kernel/mm/hugepages"
)

// HugePageSize returns the default huge page size in bytes: the
// Hugepagesize line of /proc/meminfo (what MAP_HUGETLB without a size flag
// uses), else the smallest size under /sys/kernel/mm/hugepages. It is not
// always 2 MiB: 1 GiB on systems booted with default_hugepagesz=1G, 512 MiB
// or 32 MiB with 64 KiB pages on arm64.
func HugePageSize() (int, error) {
	if f, err := os.Open(meminfoPath); err == nil {
		n, perr := parseMeminfoHugepagesize(f)
		f.Close()
		if perr == nil {
			return n, nil
		}
	}
	ents, err := os.ReadDir(hugeDir)
	if err != nil {
		return 0, fmt.Errorf("%w: no huge page size in %s or %s", ErrNotSupported, meminfoPath, hugeDir)
	}
	var sizes []int
	for _, e := range ents {
		if n, ok := parseHugeDir(e.Name()); ok {
			sizes = append(sizes, n)
		}
	}
	if len(sizes) == 0 {
		return 0, fmt.Errorf("%w: no huge page sizes under %s", ErrNotSupported, hugeDir)
	}
	sort.Ints(sizes)
	return sizes[0], nil
}

// parseMeminfoHugepagesize reads "Hugepagesize:    2048 kB".
func parseMeminfoHugepagesize(r io.Reader) (int, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "Hugepagesize:")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("meminfo: bad Hugepagesize line %q", sc.Text())
		}
		kb, err := strconv.Atoi(f[0])
		if err != nil || kb <= 0 {
			return 0, fmt.Errorf("meminfo: bad Hugepagesize line %q", sc.Text())
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("meminfo: no Hugepagesize line")
}

// parseHugeDir reads a directory name like "hugepages-1048576kB".
func parseHugeDir(name string) (int, bool) {
	v, ok := strings.CutPrefix(filepath.Base(name), "hugepages-")
	if !ok {
		return 0, false
	}
	v, ok = strings.CutSuffix(v, "kB")
	if !ok {
		return 0, false
	}
	kb, err := strconv.Atoi(v)
	if err != nil || kb <= 0 {
		return 0, false
	}
	return kb << 10, true
}

// NetlinkRDMA opens a NETLINK_RDMA socket bound to the kernel.
func NetlinkRDMA() (*FD, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_RDMA)
	if err != nil {
		return nil, errnoErr(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind: %w", errnoErr(err))
	}
	return NewFD(fd), nil
}

// NetlinkUevent opens a NETLINK_KOBJECT_UEVENT socket subscribed to the
// kernel's uevent broadcast (group 1), which any user may read: device
// files appearing and going away.
func NetlinkUevent() (*FD, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_KOBJECT_UEVENT)
	if err != nil {
		return nil, errnoErr(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind uevent group: %w", errnoErr(err))
	}
	return NewFD(fd), nil
}

// NetlinkSend sends one request to the kernel on a netlink socket.
func NetlinkSend(fd *FD, b []byte) error {
	return fd.use(func(raw int) error {
		return errnoErr(unix.Sendto(raw, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}))
	})
}

// NetlinkRecv receives one datagram, retrying EINTR.
func NetlinkRecv(fd *FD, b []byte) (int, error) {
	var n int
	err := fd.use(func(raw int) error {
		for {
			var err error
			n, _, err = unix.Recvfrom(raw, b, 0)
			if err == unix.EINTR {
				continue
			}
			return errnoErr(err)
		}
	})
	return n, err
}

// UsableSpace is the space an unprivileged user may still allocate in the
// file system holding path (statvfs f_bavail x f_frsize, as the C Aeron
// driver's aeron_usable_fs_space).
func UsableSpace(path string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, errnoErr(err)
	}
	bs := uint64(st.Frsize)
	if bs == 0 {
		bs = uint64(st.Bsize)
	}
	return st.Bavail * bs, nil
}

// Allocate reserves the blocks of f's first size bytes (fallocate(2), mode
// 0), as the C driver's files are filled with zeros when made: a write to a
// mapped page the file system has no room for is a SIGBUS, which kills the
// process, where a full file system at creation is an error. A file system
// without fallocate (EOPNOTSUPP, or ENOSYS under a seccomp filter) leaves
// the file as it is.
func Allocate(f *os.File, size int64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			// tmpfs gives up with EINTR when a signal is pending (the Go
			// runtime's preemption) and undoes what it allocated: again
			if ferr = unix.Fallocate(int(fd), 0, 0, size); ferr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if ferr == unix.EOPNOTSUPP || ferr == unix.ENOSYS {
		return nil // no fallocate here (or a sandbox refuses it): the file stays sparse
	}
	return errnoErr(ferr)
}
