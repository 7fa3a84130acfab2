package mlx5

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
	"github.com/ibgo/ibgo/uverbs"
)

const (
	mmapCmdClockInfo      = 7 // MLX5_IB_MMAP_CLOCK_INFO
	clockInfoV1           = 0 // MLX5_IB_CLOCK_INFO_V1
	clockInfoKernelUpdate = 1 // MLX5_IB_CLOCK_INFO_KERNEL_UPDATING
)

// ErrNoClockInfo: the kernel offers no clock-info page (mlx5_ib without
// clock_info_versions V1, or the mapping failed), so HCA timestamps cannot
// be converted to real time.
var ErrNoClockInfo = errors.New("mlx5: no clock-info page")

// ClockInfo is a consistent snapshot of the kernel's mlx5_ib_clock_info
// (rdma-core struct mlx5dv_clock_info).
type ClockInfo struct {
	NSec       uint64
	LastCycles uint64
	Frac       uint64
	Mult       uint32
	Shift      uint32
	Mask       uint64
}

// mapClockInfo maps the read-only clock-info page as rdma-core mlx5.c:
// mlx5_map_clock_info: mmap command CLOCK_INFO, index V1. A failure only
// disables timestamp conversion.
func (c *Context) mapClockInfo(fd *sys.FD) {
	if c.Resp.ClockInfoVersions&(1<<clockInfoV1) == 0 {
		return
	}
	off := int64(mmapCmdClockInfo<<8|clockInfoV1) * int64(sys.Pagesize)
	m, err := sys.Mmap(fd, off, sys.Pagesize, syscall.PROT_READ, syscall.MAP_SHARED)
	if err == nil {
		c.clockPage = m
	}
}

// readClockInfo mirrors rdma-core mlx5dv_get_clock_info: a seqlock read of
// the page the kernel updates (sign odd while it writes).
func readClockInfo(p unsafe.Pointer) (ClockInfo, error) {
	ci := (*abi.Mlx5ClockInfo)(p)
	sig := (*uint32)(unsafe.Pointer(&ci.Sign))
	for {
		var s uint32
		retry := 10
		for {
			s = atomic.LoadUint32(sig)
			if s&clockInfoKernelUpdate == 0 {
				break
			}
			if retry--; retry == 0 {
				return ClockInfo{}, fmt.Errorf("%w: the kernel is updating the clock-info page", sys.NewErrno(syscall.EBUSY))
			}
		}
		out := ClockInfo{
			NSec:       atomic.LoadUint64(&ci.NSec),
			LastCycles: atomic.LoadUint64(&ci.Cycles),
			Frac:       atomic.LoadUint64(&ci.Frac),
			Mult:       atomic.LoadUint32(&ci.Mult),
			Shift:      atomic.LoadUint32(&ci.Shift),
			Mask:       atomic.LoadUint64(&ci.Mask),
		}
		if atomic.LoadUint32(sig) == s {
			return out, nil
		}
	}
}

// ToNS mirrors rdma-core mlx5dv_ts_to_ns: the real time in nanoseconds of
// a free-running HCA timestamp near the snapshot.
func (ci *ClockInfo) ToNS(ts uint64) uint64 {
	delta := (ts - ci.LastCycles) & ci.Mask
	nsec := ci.NSec
	if delta > ci.Mask/2 {
		// An older timestamp than the snapshot.
		delta = (ci.LastCycles - ts) & ci.Mask
		return nsec - ((delta*uint64(ci.Mult))-ci.Frac)>>ci.Shift
	}
	return nsec + ((delta*uint64(ci.Mult))+ci.Frac)>>ci.Shift
}

// Clock returns a snapshot of the context's clock-info page. Safe to call
// concurrently.
func Clock(uc *uverbs.Context) (ClockInfo, error) {
	c, ok := uc.Provider().(*Context)
	if !ok {
		return ClockInfo{}, fmt.Errorf("%w: not an mlx5 context", uverbs.ErrNotSupported)
	}
	if c.clockPage == nil {
		return ClockInfo{}, ErrNoClockInfo
	}
	return readClockInfo(unsafe.Pointer(&c.clockPage[0]))
}

// PollTimestamps polls an mlx5 CQ like CQ.Poll and also stores each
// completion's raw HCA timestamp (the CQE's free-running core-clock value)
// in ts[i]; ts must be at least as long as wc. Convert with Clock and ToNS.
// A CQ created with uverbs.CQInitAttr.Timestamps has the same value in
// WC.Timestamp from plain Poll; this is for CQs created without it.
// It allocates nothing; safe to call concurrently with Poll on the same CQ.
func PollTimestamps(q *uverbs.CQ, wc []uverbs.WC, ts []uint64) (int, error) {
	d, ok := q.Driver().(*cq)
	if !ok {
		return 0, fmt.Errorf("%w: not an mlx5 CQ", uverbs.ErrNotSupported)
	}
	if len(ts) < len(wc) {
		return 0, postErr("poll cq", syscall.EINVAL, "%d timestamp slots for %d completions", len(ts), len(wc))
	}
	d.mu.Lock()
	d.ring.ts = ts
	n, err := d.ring.poll(wc)
	d.ring.ts = nil
	d.mu.Unlock()
	return n, err
}
