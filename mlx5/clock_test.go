package mlx5

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/uverbs"
)

func TestClockInfoSeqlockAndConversion(t *testing.T) {
	page := alignedMem(4096)
	ci := (*abi.Mlx5ClockInfo)(unsafe.Pointer(&page[0]))
	// A 1 GHz-like clock: mult/2^shift = 1 ns per cycle.
	*ci = abi.Mlx5ClockInfo{Sign: 2, NSec: 1_000_000_000, Cycles: 5000, Frac: 0, Mult: 1 << 10, Shift: 10, Mask: 1<<48 - 1}
	got, err := readClockInfo(unsafe.Pointer(ci))
	require.NoError(t, err)
	require.Equal(t, ClockInfo{NSec: 1_000_000_000, LastCycles: 5000, Mult: 1 << 10, Shift: 10, Mask: 1<<48 - 1}, got)
	require.Equal(t, uint64(1_000_000_250), got.ToNS(5250), "newer timestamp")
	require.Equal(t, uint64(999_999_000), got.ToNS(4000), "older timestamp")
	// Across the counter wrap: last cycles near the mask, timestamp past 0.
	got.LastCycles = 1<<48 - 10
	require.Equal(t, uint64(1_000_000_020), got.ToNS(10))
	// A 156.25 MHz clock (6.4 ns per cycle) with a fractional carry.
	c2 := ClockInfo{NSec: 0, LastCycles: 0, Mult: 6554, Shift: 10, Mask: 1<<48 - 1}
	require.InDelta(t, 6400*1000, float64(c2.ToNS(1000*1000)), 6400*1000*0.001)

	ci.Sign = 3 // the kernel is writing
	_, err = readClockInfo(unsafe.Pointer(ci))
	var e syscall.Errno
	require.True(t, errors.As(err, &e))
	require.Equal(t, syscall.EBUSY, e)
}

// Polling with a timestamp slice returns each CQE's raw timestamp.
func TestPollTimestamps(t *testing.T) {
	p := newPair(t, uverbs.QPTypeRC, 4, 4, 8)
	p.post(t, p.a, uverbs.SendWR{WRID: 9, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, RemoteAddr: memAddr(p.memB), RKey: keyB,
		SGL: []uverbs.SGE{sge(p.memA, 0, 8, keyA)}})
	put64(p.a.r.scq.cqe(0), offTimestamp, 0x0123456789abcdef) // what the HCA stamps
	ts := make([]uint64, 2)
	wc := make([]uverbs.WC, 2)
	p.a.r.scq.ts = ts
	n, err := p.a.r.scq.poll(wc)
	p.a.r.scq.ts = nil
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, uint64(0x0123456789abcdef), ts[0])
}

// The context's completion clock converts raw CQE stamps through the page,
// and refuses what it cannot convert.
func TestHWClockWallNS(t *testing.T) {
	page := alignedMem(4096)
	ci := (*abi.Mlx5ClockInfo)(unsafe.Pointer(&page[0]))
	*ci = abi.Mlx5ClockInfo{Sign: 2, NSec: 1_700_000_000_000_000_000, Cycles: 5000, Mult: 1 << 10, Shift: 10, Mask: 1<<48 - 1}
	h := &hwClock{page: unsafe.Pointer(ci)}
	ns, ok := h.WallNS(5250)
	require.True(t, ok)
	require.Equal(t, int64(1_700_000_000_000_000_250), ns)
	ns, ok = h.WallNS(4000)
	require.True(t, ok)
	require.Equal(t, int64(1_699_999_999_999_999_000), ns, "a stamp older than the page's snapshot")
	_, ok = h.WallNS(0)
	require.False(t, ok, "0 is a CQ without timestamps")
	require.Zero(t, testing.AllocsPerRun(100, func() { h.WallNS(5250) }), "WallNS allocations")

	ci.Sign = 3 // the kernel is rewriting the page
	_, ok = h.WallNS(5250)
	require.False(t, ok)
	*ci = abi.Mlx5ClockInfo{Sign: 0} // never filled: mult 0
	_, ok = h.WallNS(5250)
	require.False(t, ok)
	*ci = abi.Mlx5ClockInfo{NSec: 1 << 63, Cycles: 5000, Mult: 1, Mask: 1<<48 - 1}
	_, ok = h.WallNS(6000)
	require.False(t, ok, "beyond int64")

	h.forget()
	_, ok = h.WallNS(5250)
	require.False(t, ok, "after Close")
	_, err := h.snapshot()
	require.ErrorIs(t, err, ErrNoClockInfo)
}

// uverbs.Context.CompletionClock over the fake kernel: the device's
// EX_QUERY_DEVICE reports a timestamp mask, the provider the clock-info
// page; a timestamped CQ's WC.Timestamp converts to the page's real time.
func TestFakeKernelCompletionClock(t *testing.T) {
	overBoth(t, func(t *testing.T, ioctl bool) {
		p := newFKPair(t, ioctl, 8, 8, 16, true)
		require.True(t, p.cqA.Timestamps())
		clk, err := p.ctx.CompletionClock()
		require.NoError(t, err)
		p.send(t, uverbs.SendWR{WRID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
			RemoteAddr: memAddr(p.memB), RKey: p.mrB.RKey(), SGL: []uverbs.SGE{p.sgeA(0, 8)}})
		// The HCA's stamp as bytes: mlx5_cqe64.timestamp at 48, big-endian.
		ring := &p.cqA.Driver().(*cq).ring
		copy((*[64]byte)(ring.cqe(ring.consIndex))[48:56], []byte{0, 0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab})
		wc := pollN(t, p.cqA, 1)
		raw := wc[0].Timestamp
		require.Equal(t, uint64(0x0123456789ab), raw, "WC.Timestamp is the CQE's bytes 48..55, big-endian")
		// 156.25 MHz as the kernel's timecounter would describe it: 6.4 ns
		// a tick (mult/2^shift = 6554/1024; 1000 ticks = 6400.39 ns).
		ci := (*abi.Mlx5ClockInfo)(unsafe.Pointer(&p.k.clock[0]))
		*ci = abi.Mlx5ClockInfo{NSec: 1_700_000_000_000_000_000, Cycles: raw - 1000, Mult: 6554, Shift: 10, Mask: 1<<48 - 1}
		ns, ok := clk.WallNS(raw)
		require.True(t, ok)
		require.Equal(t, int64(1_700_000_000_000_006_400), ns)
		c, err := Clock(p.ctx)
		require.NoError(t, err)
		require.Equal(t, uint64(ns), c.ToNS(raw), "the same conversion as mlx5.Clock")

		plain, err := p.ctx.CreateCQ(uverbs.CQInitAttr{CQE: 4})
		require.NoError(t, err)
		require.False(t, plain.Timestamps())
		require.NoError(t, plain.Close())
	})
}

// Without a timestamp mask (the device) or a clock-info page (the kernel)
// there is no completion clock, and the error says which.
func TestFakeKernelNoCompletionClock(t *testing.T) {
	t.Run("no timestamp mask", func(t *testing.T) {
		k := newFakeKernel(t, true)
		k.tsMask = 0
		ctx, err := k.device().Open()
		require.NoError(t, err)
		defer ctx.Close()
		_, err = ctx.CompletionClock()
		require.ErrorIs(t, err, uverbs.ErrNotSupported)
		require.ErrorContains(t, err, "completion_timestamp_mask 0, hca_core_clock 156250 kHz")
	})
	t.Run("no clock-info page", func(t *testing.T) {
		k := newFakeKernel(t, true)
		k.noClockInfo = true
		ctx, err := k.device().Open()
		require.NoError(t, err)
		defer ctx.Close()
		require.Nil(t, k.clock, "no clock page mapped")
		_, err = ctx.CompletionClock()
		require.ErrorIs(t, err, uverbs.ErrNotSupported)
		require.ErrorIs(t, err, ErrNoClockInfo)
		_, err = Clock(ctx)
		require.ErrorIs(t, err, ErrNoClockInfo)
	})
}

// Conversions racing with Context.Close never touch the unmapped page:
// they report false from the moment Close begins (run with -race, and
// without it a read of the unmapped page would fault).
func TestCompletionClockCloseRace(t *testing.T) {
	k := newFakeKernel(t, false)
	ctx, err := k.device().Open()
	require.NoError(t, err)
	clk, err := ctx.CompletionClock()
	require.NoError(t, err)
	ci := (*abi.Mlx5ClockInfo)(unsafe.Pointer(&k.clock[0]))
	*ci = abi.Mlx5ClockInfo{NSec: 1_700_000_000_000_000_000, Cycles: 100, Mult: 1 << 8, Shift: 8, Mask: 1<<48 - 1}
	var wg sync.WaitGroup
	var converted [4]atomic.Int64
	for g := range converted {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if _, ok := clk.WallNS(200); !ok {
					return
				}
				converted[g].Add(1)
			}
		}()
	}
	for converted[0].Load() == 0 {
		runtime.Gosched()
	}
	require.NoError(t, ctx.Close())
	wg.Wait()
	_, ok := clk.WallNS(200)
	require.False(t, ok)
}
