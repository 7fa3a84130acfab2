package ib

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/uverbs"
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
	off := newStamper(m, false, nil)
	require.Zero(t, off.stamp(123), "no media-rcv-ts-offset: no timestamp")

	sw := newStamper(m, true, nil) // no CQ with timestamps: software time
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

// clocksOf is a context whose device has a wall-clock format (wall), a
// free-running clock (free), both or neither.
type clocksOf struct{ wall, free bool }

func (c clocksOf) WallClockCompletionClock() (uverbs.CompletionClock, error) {
	if !c.wall {
		return nil, errors.Join(uverbs.ErrNotSupported, errors.New("no real-time format"))
	}
	return &fakeClock{}, nil
}

func (c clocksOf) CompletionClock() (uverbs.CompletionClock, error) {
	if !c.free {
		return nil, errors.Join(uverbs.ErrNotSupported, errors.New("no clock-info page"))
	}
	return &fakeClock{}, nil
}

// The receive CQ's timestamp forms, best first: wall-clock where the
// device writes it (an mlx5 with the real-time format), then free-running
// with the clock page; none on rxe or when the channel asks for none. The
// caller's other attributes are kept.
func TestStampedAttrs(t *testing.T) {
	base := uverbs.CQInitAttr{CQE: 640, CompVector: 1}
	wall, free := base, base
	wall.WallClock = true
	free.Timestamps = true
	for _, c := range []struct {
		name string
		dev  clocksOf
		want []uverbs.CQInitAttr
	}{
		{"real-time and free-running", clocksOf{wall: true, free: true}, []uverbs.CQInitAttr{wall, free}},
		{"real-time only", clocksOf{wall: true}, []uverbs.CQInitAttr{wall}},
		{"free-running only", clocksOf{free: true}, []uverbs.CQInitAttr{free}},
		{"neither (rxe)", clocksOf{}, nil},
	} {
		require.Equal(t, c.want, stampedAttrs(c.dev, base, true), c.name)
		require.Nil(t, stampedAttrs(c.dev, base, false), "%s: no media-rcv-ts-offset", c.name)
	}
	// A caller's own Timestamps does not leak into the wall-clock form.
	in := base
	in.Timestamps = true
	got := stampedAttrs(clocksOf{wall: true, free: true}, in, true)
	require.Equal(t, []uverbs.CQInitAttr{wall, free}, got)
}
