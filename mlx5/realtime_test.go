package mlx5

import (
	"encoding/binary"
	"math"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/uverbs"
)

// rt is a CQE timestamp in the real-time format: seconds in the upper 32
// bits, nanoseconds in the lower.
func rt(sec, nsec uint32) uint64 { return uint64(sec)<<32 | uint64(nsec) }

// The real-time format's arithmetic on known values (the kernel's
// REAL_TIME_TO_NS: seconds*10^9 + nanoseconds).
func TestRealTimeToNS(t *testing.T) {
	for _, c := range []struct {
		ts   uint64
		want uint64
	}{
		{0, 0},
		{1, 1},
		{rt(1, 0), 1_000_000_000},
		{rt(1_700_000_000, 123_456_789), 1_700_000_000_123_456_789},
		{rt(1_700_000_000, 999_999_999), 1_700_000_000_999_999_999},
		{rt(1_700_000_001, 0), 1_700_000_001_000_000_000},
		// The field at its 32-bit maximum: added unchecked, as the kernel does.
		{rt(1_700_000_000, math.MaxUint32), 1_700_000_000_000_000_000 + math.MaxUint32},
		{math.MaxUint64, math.MaxUint32*1_000_000_000 + math.MaxUint32},
	} {
		require.Equal(t, c.want, RealTimeToNS(c.ts), "%#x", c.ts)
	}
	require.Equal(t, RealTimeToNS(rt(7, 999_999_999))+1, RealTimeToNS(rt(8, 0)), "the last nanosecond of a second and the next second")
	require.Less(t, RealTimeToNS(math.MaxUint64), uint64(math.MaxInt64), "no overflow of int64")
}

// The CompletionClock of real-time CQs decodes valid stamps and refuses
// what the device never writes, allocating nothing.
func TestRealTimeClockWallNS(t *testing.T) {
	var clk uverbs.CompletionClock = realTimeClock{}
	ns, ok := clk.WallNS(rt(1_700_000_000, 999_999_999))
	require.True(t, ok)
	require.Equal(t, int64(1_700_000_000_999_999_999), ns, "the nanosecond field at its largest valid value")
	ns, ok = clk.WallNS(rt(math.MaxUint32, 999_999_999))
	require.True(t, ok)
	require.Equal(t, int64(math.MaxUint32*1_000_000_000+999_999_999), ns, "the last second of the format")
	ns, ok = clk.WallNS(1)
	require.True(t, ok)
	require.Equal(t, int64(1), ns)
	for _, bad := range []uint64{0, rt(1_700_000_000, 1_000_000_000), rt(1_700_000_000, math.MaxUint32)} {
		_, ok = clk.WallNS(bad)
		require.False(t, ok, "%#x", bad)
	}
	require.Zero(t, testing.AllocsPerRun(100, func() { clk.WallNS(rt(5, 6)) }), "WallNS allocations")
}

// The alloc_ucontext comp_mask bit decides: with it, the context has a
// wall-clock completion clock; without it, ErrNotSupported naming the bit.
func TestWallClockCompletionClockSupport(t *testing.T) {
	c := &Context{}
	require.False(t, c.RealTimeTimestamps())
	_, err := c.WallClockCompletionClock()
	require.ErrorIs(t, err, uverbs.ErrNotSupported)
	require.ErrorContains(t, err, "MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS")
	c.Resp.CompMask = 1<<3 | 1<<5 // SQD2RTS, MKEY_UPDATE_TAG: neighbours, not it
	require.False(t, c.RealTimeTimestamps())
	c.Resp.CompMask |= 1 << 4
	require.True(t, c.RealTimeTimestamps())
	clk, err := c.WallClockCompletionClock()
	require.NoError(t, err)
	ns, ok := clk.WallNS(rt(2, 3))
	require.True(t, ok)
	require.Equal(t, int64(2_000_000_003), ns)
}

// With dynamic UARs the real-time flag joins UAR_PAGE_INDEX in the
// driver request: flags 6 at offset 22, the page id at 24.
func TestNewCQRealTimeDriverData(t *testing.T) {
	c := &Context{cqBF: &bfReg{pageID: 0x1234}}
	c.Resp.CompMask = ctxRespRealTimeTS
	t.Cleanup(func() { c.Close() })
	for _, wall := range []bool{false, true} {
		d, err := c.NewCQ(&uverbs.CQInitAttr{CQE: 4, WallClock: wall})
		require.NoError(t, err)
		in := d.DriverData().In
		require.Len(t, in, 32)
		want := uint16(cqFlagUARPageIndex)
		if wall {
			want |= cqFlagRealTimeTS
		}
		require.Equal(t, want, binary.LittleEndian.Uint16(in[22:]), "mlx5_ib_create_cq.flags")
		require.Equal(t, uint16(0x1234), binary.LittleEndian.Uint16(in[24:]), "uar_page_index")
		require.Equal(t, wall, d.(*cq).ring.stamps, "a wall-clock CQ fills WC.Timestamp")
		require.NoError(t, d.Destroy())
	}
	c.Resp.CompMask = 0
	_, err := c.NewCQ(&uverbs.CQInitAttr{CQE: 4, WallClock: true})
	require.ErrorIs(t, err, uverbs.ErrNotSupported, "the provider's own guard")
}

// Over the fake kernel: a context that advertises the real-time format
// creates wall-clock CQs whose create command carries
// MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS in the driver data (and the core
// timestamp flag, as libibverbs sends); the device model's CQE with a
// real-time stamp polls through uverbs to that stamp and the CQ's
// completion clock turns it into the right nanoseconds.
func TestFakeKernelRealTimeCQ(t *testing.T) {
	overBoth(t, func(t *testing.T, ioctl bool) {
		k := newFakeKernel(t, ioctl)
		k.realTime = true
		p := newFKPairOn(t, k, 8, 8, uverbs.CQInitAttr{CQE: 16, WallClock: true})
		require.Equal(t, uverbs.TimestampWallClock, p.cqA.TimestampFormat())
		require.False(t, p.cqA.Timestamps())

		uhw, flags := k.createdCQs()
		require.Len(t, uhw, 2)
		require.Equal(t, []uint32{abi.IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION, abi.IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION}, flags)
		for i, in := range uhw {
			require.Len(t, in, int(unsafe.Sizeof(abi.Mlx5CreateCQ{})))
			// Byte-exact: the request libmlx5's create_cq builds for
			// IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK on this
			// context (static UARs: no UAR_PAGE_INDEX).
			want := abi.Mlx5CreateCQ{BufAddr: binary.LittleEndian.Uint64(in), DBAddr: binary.LittleEndian.Uint64(in[8:]),
				CQESize: 64, Flags: cqFlagRealTimeTS}
			require.Equal(t, driverBytes(&want), in, "CQ %d's driver data", i)
			require.Equal(t, []byte{0x04, 0x00}, in[22:24], "flags at offset 22")
		}

		clk, err := p.cqA.CompletionClock()
		require.NoError(t, err)
		// The HCA's real-time clock as the device model writes it: the
		// next CQE carries now+1000.
		const sec, nsec = 1_700_000_123, 999_999_999
		k.dev.now = rt(sec, nsec) - 1000
		p.send(t, uverbs.SendWR{WRID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
			RemoteAddr: memAddr(p.memB), RKey: p.mrB.RKey(), SGL: []uverbs.SGE{p.sgeA(0, 8)}})
		wc := pollN(t, p.cqA, 1)
		require.Equal(t, uverbs.WCSuccess, wc[0].Status)
		require.Equal(t, rt(sec, nsec), wc[0].Timestamp, "WC.Timestamp is the CQE's stamp")
		ns, ok := clk.WallNS(wc[0].Timestamp)
		require.True(t, ok)
		require.Equal(t, int64(1_700_000_123_999_999_999), ns)

		// Polling and converting allocate nothing.
		buf := make([]uverbs.WC, 4)
		require.Zero(t, testing.AllocsPerRun(100, func() {
			n, _ := p.cqA.Poll(buf)
			if n > 0 {
				clk.WallNS(buf[0].Timestamp)
			}
		}), "poll allocations")
	})
}

// Without the real-time format the CQ is refused with ErrNotSupported and
// no command reaches the kernel; the context keeps working.
func TestFakeKernelRealTimeCQRefused(t *testing.T) {
	overBoth(t, func(t *testing.T, ioctl bool) {
		k := newFakeKernel(t, ioctl)
		ctx, err := k.device().Open()
		require.NoError(t, err)
		defer ctx.Close()
		_, err = ctx.WallClockCompletionClock()
		require.ErrorIs(t, err, uverbs.ErrNotSupported)
		counts := func() [2]int {
			k.mu.Lock()
			defer k.mu.Unlock()
			return [2]int{len(k.cmds), len(k.methods)}
		}
		before := counts()
		_, err = ctx.CreateCQ(uverbs.CQInitAttr{CQE: 8, WallClock: true})
		require.ErrorIs(t, err, uverbs.ErrNotSupported)
		require.ErrorContains(t, err, "real-time completion timestamp format")
		require.Equal(t, before, counts(), "no write command, no ioctl")
		uhw, _ := k.createdCQs()
		require.Empty(t, uhw)
		require.Empty(t, ctx.LiveObjects())

		cq, err := ctx.CreateCQ(uverbs.CQInitAttr{CQE: 8, Timestamps: true})
		require.NoError(t, err, "the free-running format still works")
		require.Equal(t, uverbs.TimestampFreeRunning, cq.TimestampFormat())
		uhw, _ = k.createdCQs()
		require.Len(t, uhw, 1)
		require.Zero(t, binary.LittleEndian.Uint16(uhw[0][22:]), "no real-time flag on a free-running CQ")
		clk, err := cq.CompletionClock()
		require.NoError(t, err, "a free-running CQ converts through the clock-info page")
		require.IsType(t, &hwClock{}, clk)
		require.NoError(t, cq.Close())
	})
}

// createdCQs snapshots the create-CQ driver requests and core flags seen
// (assertions run outside k.mu: a failing one must not hold it while the
// cleanup closes the context through the fake).
func (k *fakeKernel) createdCQs() (uhw [][]byte, flags []uint32) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([][]byte(nil), k.cqUHW...), append([]uint32(nil), k.cqFlags...)
}

// WCExCompletionTimestampWallclock through the extended poll, as libmlx5
// chooses: a real-time CQ where the context advertises the format (driver
// flag 4; ReadCompletionWallclockNS decodes the CQE's seconds:nanoseconds),
// else a free-running one (no driver flag) converted through the
// clock-info page.
func TestFakeKernelWallclockWCFlag(t *testing.T) {
	overBoth(t, func(t *testing.T, ioctl bool) {
		for _, realTime := range []bool{true, false} {
			t.Run(map[bool]string{true: "real-time", false: "free-running"}[realTime], func(t *testing.T) {
				k := newFakeKernel(t, ioctl)
				k.realTime = realTime
				p := newFKPairOn(t, k, 8, 8, uverbs.CQInitAttr{CQE: 16, WCFlags: uverbs.WCExStandard | uverbs.WCExCompletionTimestampWallclock})
				uhw, flags := k.createdCQs()
				require.Equal(t, []uint32{abi.IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION, abi.IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION}, flags)
				var want int64
				if realTime {
					require.Equal(t, uverbs.TimestampWallClock, p.cqA.TimestampFormat())
					require.Equal(t, uint16(cqFlagRealTimeTS), binary.LittleEndian.Uint16(uhw[0][22:]))
					k.dev.now = rt(1_700_000_456, 7) - 1000
					want = 1_700_000_456_000_000_007
				} else {
					require.Equal(t, uverbs.TimestampFreeRunning, p.cqA.TimestampFormat())
					require.Zero(t, binary.LittleEndian.Uint16(uhw[0][22:]))
					// 1 ns a tick, the page's snapshot 1000 ticks before the CQE.
					k.dev.now = 0x10000 - 1000
					ci := (*abi.Mlx5ClockInfo)(unsafe.Pointer(&k.clock[0]))
					*ci = abi.Mlx5ClockInfo{NSec: 1_700_000_000_000_000_000, Cycles: 0x10000 - 1000, Mult: 1 << 10, Shift: 10, Mask: 1<<48 - 1}
					want = 1_700_000_000_000_001_000
				}
				p.send(t, uverbs.SendWR{WRID: 5, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
					RemoteAddr: memAddr(p.memB), RKey: p.mrB.RKey(), SGL: []uverbs.SGE{p.sgeA(0, 8)}})
				require.NoError(t, p.cqA.StartPoll())
				require.Equal(t, uint64(5), p.cqA.WRID())
				require.Equal(t, uint64(want), p.cqA.ReadCompletionWallclockNS(), "real time %v", realTime)
				p.cqA.EndPoll()
			})
		}
	})
}
