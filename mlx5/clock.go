package mlx5

import (
	"errors"
	"fmt"
	"math"
	"sync"
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

	// rdma/mlx5-abi.h: the real-time timestamp format.
	ctxRespRealTimeTS = 1 << 4 // MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS (alloc_ucontext comp_mask)
	cqFlagRealTimeTS  = 1 << 2 // MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS (mlx5_ib_create_cq.flags)
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
		c.clock.page = unsafe.Pointer(&m[0])
	}
}

// hwClock is a context's uverbs.CompletionClock: rdma-core's
// mlx5dv_get_clock_info + mlx5dv_ts_to_ns over the clock-info page.
//
// Lifetime: the page is read under mu's read lock, and Context.Close takes
// the write lock and forgets the page before it unmaps it, so a conversion
// racing with Close reports false instead of reading unmapped memory. The
// read lock is one atomic add; no allocation.
type hwClock struct {
	mu   sync.RWMutex
	page unsafe.Pointer // the mapped mlx5_ib_clock_info; nil: none, or unmapped
}

// snapshot reads the page (ErrNoClockInfo without one).
func (h *hwClock) snapshot() (ClockInfo, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.page == nil {
		return ClockInfo{}, ErrNoClockInfo
	}
	return readClockInfo(h.page)
}

// WallNS implements uverbs.CompletionClock. A zero raw stamp (a CQ created
// without timestamps), a page the kernel is rewriting, one it has not
// filled (mult 0) or a result beyond int64 report false.
func (h *hwClock) WallNS(raw uint64) (int64, bool) {
	if raw == 0 {
		return 0, false
	}
	h.mu.RLock()
	if h.page == nil {
		h.mu.RUnlock()
		return 0, false
	}
	ci, err := readClockInfo(h.page)
	h.mu.RUnlock()
	if err != nil || ci.Mult == 0 {
		return 0, false
	}
	ns := ci.ToNS(raw)
	if ns == 0 || ns > math.MaxInt64 {
		return 0, false
	}
	return int64(ns), true
}

// forget drops the page before Close unmaps it (see hwClock).
func (h *hwClock) forget() {
	h.mu.Lock()
	h.page = nil
	h.mu.Unlock()
}

var _ uverbs.CompletionClocker = (*Context)(nil)

// CompletionClock is uverbs.CompletionClocker: the clock-info page the
// kernel maps read-only (mlx5_ib clock_info_versions V1) converts the
// free-running HCA time of each CQE (WC.Timestamp of a CQ created with
// uverbs.CQInitAttr.Timestamps) to the HCA clock's real time, as
// mlx5dv_ts_to_ns does. Without the page it returns an error wrapping
// uverbs.ErrNotSupported and ErrNoClockInfo. The clock is the context's:
// valid until Context.Close, after which it reports false.
//
// The kernel gives a CQ created with IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION
// the free-running format (mlx5_ib qp.c: get_ts_format); a device that has
// only the real-time format refuses QPs on such a CQ with EOPNOTSUPP.
func (c *Context) CompletionClock() (uverbs.CompletionClock, error) {
	c.clock.mu.RLock()
	ok := c.clock.page != nil
	c.clock.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: %w (the kernel offered clock_info_versions %#x; V1 is needed)",
			uverbs.ErrNotSupported, ErrNoClockInfo, c.Resp.ClockInfoVersions)
	}
	return &c.clock, nil
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
// concurrently, also with Context.Close (then ErrNoClockInfo).
func Clock(uc *uverbs.Context) (ClockInfo, error) {
	c, ok := uc.Provider().(*Context)
	if !ok {
		return ClockInfo{}, fmt.Errorf("%w: not an mlx5 context", uverbs.ErrNotSupported)
	}
	return c.clock.snapshot()
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

// Real-time completion timestamps. A ConnectX whose clock runs in the
// real-time format (ConnectX-6 Dx and later, REAL_TIME_CLOCK_ENABLE) writes
// each CQE's timestamp as wall-clock time: seconds in the upper 32 bits,
// nanoseconds in the lower 32. mlx5_ib offers it to user space when the
// SQ, RQ and QP timestamp formats all allow real time (main.c:
// set_ucontext_resp sets MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS),
// and a CQ asks for it with MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS in its
// driver data (rdma-core verbs.c: create_cq, for
// IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK without
// IBV_WC_EX_WITH_COMPLETION_TIMESTAMP). A QP takes its timestamp format
// from its CQs (qp.c: get_ts_format): a real-time CQ on a device without
// the format, a free-running one on a device with only real time, or a
// send and a receive CQ of different formats make QP creation fail with
// EOPNOTSUPP.

var _ uverbs.WallClockCompletionClocker = (*Context)(nil)

// RealTimeTimestamps reports whether the kernel offered the real-time
// completion timestamp format (rdma-core's MLX5DV_CONTEXT_FLAGS_REAL_TIME_TS).
func (c *Context) RealTimeTimestamps() bool { return c.Resp.CompMask&ctxRespRealTimeTS != 0 }

// WallClockCompletionClock is uverbs.WallClockCompletionClocker: on a
// context with the real-time format, the decoder of the CQE timestamps of
// CQs created with uverbs.CQInitAttr.WallClock; otherwise an error
// wrapping uverbs.ErrNotSupported.
//
// rdma-core's ibv_wc_read_completion_wallclock_ns returns such a CQE's
// timestamp unconverted (cq.c: mlx5_cq_fill_pfns picks
// mlx5_cq_read_wc_completion_ts), although the field is seconds and
// nanoseconds, not nanoseconds; this decodes it as the kernel's mlx5 core
// does (lib/clock.h: mlx5_real_time_cyc2time).
func (c *Context) WallClockCompletionClock() (uverbs.CompletionClock, error) {
	if !c.RealTimeTimestamps() {
		return nil, fmt.Errorf("%w: the kernel does not offer the real-time completion timestamp format (alloc_ucontext comp_mask %#x lacks MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS: it needs a ConnectX-6 Dx or later with the real-time clock enabled, REAL_TIME_CLOCK_ENABLE in mlxconfig)",
			uverbs.ErrNotSupported, c.Resp.CompMask)
	}
	return realTimeClock{}, nil
}

// RealTimeToNS converts a CQE timestamp in the real-time format (seconds
// in bits 63..32, nanoseconds in bits 31..0) to nanoseconds since the Unix
// epoch. It mirrors the kernel's REAL_TIME_TO_NS (mlx5 core lib/clock.h),
// which does not check the nanosecond field: a value above 999999999 is
// added as it is. The result cannot overflow: at most
// (2^32-1)*10^9 + 2^32-1, below 2^63.
func RealTimeToNS(ts uint64) uint64 {
	return (ts>>32)*1_000_000_000 + ts&0xffffffff
}

// realTimeClock is the uverbs.CompletionClock of real-time CQs: a pure
// function of the stamp, with no state to lose when the context closes.
type realTimeClock struct{}

// WallNS implements uverbs.CompletionClock. A zero stamp (a CQE without
// one) and a nanosecond field of a second or more (not a time the device
// writes) report false.
func (realTimeClock) WallNS(raw uint64) (int64, bool) {
	if raw == 0 || raw&0xffffffff >= 1_000_000_000 {
		return 0, false
	}
	return int64(RealTimeToNS(raw)), true
}
