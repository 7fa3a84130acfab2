package mlx5

import (
	"errors"
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
