package ib

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeClock converts raw stamps as a device clock would: ns = base + raw,
// refusing raw 0 and, when broken, everything.
type fakeClock struct {
	base   int64
	broken bool
}

func (c *fakeClock) WallNS(raw uint64) (int64, bool) {
	if raw == 0 || c.broken {
		return 0, false
	}
	return c.base + int64(raw), true
}

func TestStamperSoftwareAndOff(t *testing.T) {
	m := New()
	off := newStamper(m, false, nil, nil)
	require.Zero(t, off.stamp(123), "no media-rcv-ts-offset: no timestamp")

	sw := newStamper(m, true, nil, nil) // no CQ with timestamps: software time
	require.Nil(t, sw.clock)
	require.EqualValues(t, 1, m.MediaClock.Software.Load())
	before := time.Now().UnixNano()
	ts := sw.stamp(0)
	require.True(t, ts >= before && ts <= time.Now().UnixNano(), "software receive time %d", ts)
	require.Zero(t, m.MediaClock.Fallbacks.Load(), "software time on a device without a clock is no fallback")
}

func TestStamperHardware(t *testing.T) {
	m := New()
	var reported []error
	m.SetErrorHandler(func(err error) { reported = append(reported, err) })
	const now = int64(1_700_000_000_000_000_000)
	clk := &fakeClock{base: now - 5000}
	s := stamper{on: true, clock: clk, m: m, now: func() int64 { return now }, skew: int64(time.Second)}

	require.Equal(t, now-1000, s.stamp(4000), "the hardware receive time, 1 µs before polling")
	require.Zero(t, m.MediaClock.Fallbacks.Load())

	require.Equal(t, now, s.stamp(0), "a completion without a stamp: software time")
	require.EqualValues(t, 1, m.MediaClock.Fallbacks.Load())
	clk.broken = true // the kernel rewriting the clock page
	require.Equal(t, now, s.stamp(4000))
	require.EqualValues(t, 2, m.MediaClock.Fallbacks.Load())
	require.Empty(t, reported, "a failed conversion is counted, not logged")

	// A PHC 37 s ahead of the host (TAI against UTC): software time, one
	// report however many frames.
	clk.broken, clk.base = false, now+37*int64(time.Second)
	require.Equal(t, now, s.stamp(1))
	require.Equal(t, now, s.stamp(2))
	require.EqualValues(t, 4, m.MediaClock.Fallbacks.Load())
	require.Len(t, reported, 1)
	require.ErrorContains(t, reported[0], "37s from the host's clock")
	// Just inside the bound, either side.
	clk.base = now - 5000
	require.Equal(t, now+int64(time.Second), s.stamp(5000+uint64(time.Second)))
	clk.base = now - int64(time.Second) - 5000
	require.Equal(t, now-int64(time.Second), s.stamp(5000))
	require.EqualValues(t, 4, m.MediaClock.Fallbacks.Load())

	s.now = softwareNow
	clk.base = time.Now().UnixNano()
	require.Zero(t, testing.AllocsPerRun(100, func() { s.stamp(7) }), "stamp allocations")
	require.Zero(t, testing.AllocsPerRun(100, func() { s.stamp(0) }), "fallback allocations")
}
