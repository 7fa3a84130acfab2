package uverbs

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/ibgo/ibgo/internal/nl"
	"github.com/ibgo/ibgo/internal/sys"
)

// Memory is a region for RDMA buffers: anonymous mmap'd memory outside the Go
// heap, so the garbage collector never moves or frees it while the device
// reads and writes it. Register it with PD.RegMR.
//
// Concurrency: every method is safe for concurrent use; the slice Bytes
// returned must not be used after Close.
type Memory struct {
	mu   sync.Mutex
	b    []byte
	huge bool
}

// MemoryOptions tune AllocMemory.
type MemoryOptions struct {
	// HugePages backs the region with huge pages (MAP_HUGETLB); the size is
	// rounded up to the system's default huge page size (Hugepagesize in
	// /proc/meminfo: 2 MiB, 1 GiB, or 512 MiB on 64 KiB-page arm64).
	// Fails with ErrNotSupported when none are reserved (vm.nr_hugepages).
	HugePages bool
	// Populate faults the pages in now (MAP_POPULATE) instead of at first use.
	Populate bool
}

// AllocMemory maps size bytes (rounded up to a page) of zeroed memory. Unless
// the kernel has copy-on-fork for pinned pages, the region is marked
// MADV_DONTFORK, so a fork cannot leave the parent's DMA pages
// copy-on-write (rdma-core libibverbs/memory.c: ibv_fork_init).
func AllocMemory(size int, opts MemoryOptions) (*Memory, error) {
	if size <= 0 {
		return nil, &Error{Op: "alloc memory", Err: fmt.Errorf("%w: size %d", sys.NewErrno(sys.EINVAL), size)}
	}
	flags := 0
	align := sys.Pagesize
	if opts.HugePages {
		hp, err := sys.HugePageSize()
		if err != nil {
			return nil, &Error{Op: "alloc memory", Err: fmt.Errorf("%w: huge page size: %v", ErrNotSupported, err)}
		}
		flags |= sys.MapHugeTLB
		align = hp
	}
	if opts.Populate {
		flags |= sys.MapPopulate
	}
	if size > math.MaxInt-(align-1) {
		return nil, &Error{Op: "alloc memory", Err: fmt.Errorf("%w: size %d does not round up to whole %d-byte pages", sys.NewErrno(sys.EINVAL), size, align)}
	}
	n := (size + align - 1) &^ (align - 1)
	b, err := sys.MmapAnon(n, flags)
	if err != nil {
		if opts.HugePages && (errors.Is(err, sys.ENOMEM) || errors.Is(err, sys.EINVAL)) {
			return nil, &Error{Op: "alloc memory", Err: fmt.Errorf("%w: no huge pages for %d bytes: %v", ErrNotSupported, n, err),
				Hint: "reserve some: sysctl vm.nr_hugepages=N"}
		}
		return nil, &Error{Op: "alloc memory", Err: err}
	}
	if !copyOnFork() {
		if err := sys.DontFork(b); err != nil {
			sys.Munmap(b)
			return nil, &Error{Op: "alloc memory", Err: fmt.Errorf("madvise(MADV_DONTFORK): %w", err)}
		}
	}
	return &Memory{b: b[:size], huge: opts.HugePages}, nil
}

// Bytes returns the region. It must not be used after Close.
func (m *Memory) Bytes() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.b
}

// Len is the region's size.
func (m *Memory) Len() int { return len(m.Bytes()) }

// Close unmaps the region. Deregister its MRs first: the device would
// otherwise keep pinned pages the process no longer maps.
func (m *Memory) Close() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.b == nil {
		return nil
	}
	err := sys.Munmap(m.b[:cap(m.b)])
	m.b = nil
	if err != nil {
		return &Error{Op: "free memory", Err: err}
	}
	return nil
}

var (
	cofOnce sync.Once
	cof     bool
)

// copyOnFork reports whether the kernel keeps pinned pages safe across fork
// (RDMA netlink RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK, kernels >= 5.13).
func copyOnFork() bool {
	cofOnce.Do(func() {
		c, err := nl.Dial()
		if err != nil {
			return
		}
		defer c.Close()
		if a, err := c.Sys(); err == nil {
			cof = a.CopyOnFork
		}
	})
	return cof
}

// Memlock describes the locked-memory budget that MR registration and
// kernel-pinned queues draw from.
type Memlock struct {
	Limit     uint64 // RLIMIT_MEMLOCK soft limit, bytes (math.MaxUint64: unlimited)
	Pinned    uint64 // already pinned by this process (VmPin), bytes
	Unlimited bool   // no limit applies (RLIM_INFINITY or CAP_IPC_LOCK)
}

// QueryMemlock reads the limit and the process's current pinned memory.
func QueryMemlock() (Memlock, error) {
	limit, unlimited, err := sys.MemlockLimit()
	if err != nil {
		return Memlock{}, err
	}
	m := Memlock{Limit: limit, Unlimited: unlimited || hasCapIPCLock()}
	m.Pinned = vmPin()
	return m, nil
}

// CheckMemlock returns an error naming the current limit and the fix when
// pinning n more bytes would exceed RLIMIT_MEMLOCK.
func CheckMemlock(n int) error {
	m, err := QueryMemlock()
	if err != nil || m.Unlimited {
		return nil
	}
	if m.Pinned+uint64(n) <= m.Limit {
		return nil
	}
	return &Error{Op: "check memlock", Err: fmt.Errorf("%w: pinning %d more bytes would exceed RLIMIT_MEMLOCK", sys.NewErrno(sys.ENOMEM), n),
		Hint: memlockHint(m)}
}

func memlockHint(m Memlock) string {
	return fmt.Sprintf("locked-memory limit is %d KiB with %d KiB already pinned; raise it with `ulimit -l unlimited` "+
		"(or LimitMEMLOCK= in a systemd unit, --ulimit memlock=-1 for containers) or grant CAP_IPC_LOCK", m.Limit/1024, m.Pinned/1024)
}

// memlockErr turns the kernel's bare ENOMEM from a pinning command into an
// error that names the limit and the fix.
func memlockErr(dev, op string, err error) error {
	if !errors.Is(err, sys.ENOMEM) {
		return opErr(dev, op, err)
	}
	m, qerr := QueryMemlock()
	if qerr != nil || m.Unlimited {
		return opErr(dev, op, err)
	}
	return &Error{Op: op, Device: dev, Err: err, Hint: memlockHint(m)}
}

func vmPin() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmPin:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func hasCapIPCLock() bool {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<sys.CapIPCLock) != 0
		}
	}
	return false
}
