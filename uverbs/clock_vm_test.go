//go:build linux

package uverbs_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ibgo/ibgo/uverbs"
)

// rxe has no completion clock: EX_QUERY_DEVICE reports a zero timestamp
// mask and core clock (rxe never sets them), CompletionClock says so with
// an error matching ErrNotSupported, a timestamped CQ is refused
// (EOPNOTSUPP from rxe_create_cq, which also matches ErrNotSupported)
// without leaving an object behind, and the context keeps working: plain
// CQs complete with WC.Timestamp 0 and report Timestamps false.
func TestCompletionClockRXE(t *testing.T) {
	b := newBed(t)
	a, err := b.ctx.QueryDevice()
	require.NoError(t, err)
	require.True(t, a.Extended, "EX_QUERY_DEVICE answered")
	require.Zero(t, a.CompletionTimestampMask, "rxe's completion_timestamp_mask")
	require.Zero(t, a.HCACoreClock, "rxe's hca_core_clock")

	clk, err := b.ctx.CompletionClock()
	require.Nil(t, clk)
	var ue *uverbs.Error
	require.True(t, errors.As(err, &ue), "%T is not a *uverbs.Error: %v", err, err)
	require.Equal(t, "completion clock", ue.Op)
	require.Equal(t, b.vm.Dev, ue.Device)
	require.ErrorIs(t, err, uverbs.ErrNotSupported)
	require.ErrorContains(t, err, "completion_timestamp_mask 0, hca_core_clock 0 kHz")

	before := b.ctx.LiveObjects()
	_, err = b.ctx.CreateCQ(uverbs.CQInitAttr{CQE: 8, Timestamps: true})
	require.ErrorIs(t, err, uverbs.ErrNotSupported)
	require.ErrorIs(t, err, unix.EOPNOTSUPP)
	_, err = b.ctx.CreateCQ(uverbs.CQInitAttr{CQE: 8, WCFlags: uverbs.WCExStandard | uverbs.WCExCompletionTimestamp})
	require.ErrorIs(t, err, unix.EOPNOTSUPP, "the extended poll's timestamp flag asks the same")
	// No wall-clock format either: refused by ibgo before any command.
	_, err = b.ctx.WallClockCompletionClock()
	require.ErrorIs(t, err, uverbs.ErrNotSupported)
	require.ErrorContains(t, err, "provider has no wall-clock completion timestamps")
	_, err = b.ctx.CreateCQ(uverbs.CQInitAttr{CQE: 8, WallClock: true})
	require.ErrorIs(t, err, uverbs.ErrNotSupported)
	require.False(t, errors.Is(err, unix.EOPNOTSUPP), "not the kernel's refusal: no command was sent")
	require.Equal(t, before, b.ctx.LiveObjects(), "a refused CQ leaves nothing")

	p := b.pair(uverbs.QPTypeRC, defaultCap)
	require.False(t, p.acq.Timestamps())
	require.Equal(t, uverbs.TimestampNone, p.acq.TimestampFormat())
	_, err = p.acq.CompletionClock()
	require.ErrorIs(t, err, uverbs.ErrNotSupported)
	am, amr := b.mem(4096, uverbs.AccessLocalWrite)
	_, zmr := b.mem(4096, uverbs.AccessLocalWrite)
	fill(am.Bytes()[:64], 5)
	_, err = p.z.PostRecv([]uverbs.RecvWR{{WRID: 7, SGL: []uverbs.SGE{zmr.SGE(0, 4096)}}})
	require.NoError(t, err)
	_, err = p.a.PostSend([]uverbs.SendWR{{WRID: 8, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{amr.SGE(0, 64)}}})
	require.NoError(t, err)
	sc := wait(t, p.acq, 1)[0]
	rc := wait(t, p.zcq, 1)[0]
	require.Equal(t, uverbs.WCSuccess, sc.Status, sc.Status.String())
	require.Equal(t, uverbs.WCSuccess, rc.Status, rc.Status.String())
	require.Zero(t, sc.Timestamp, "no timestamps on a plain CQ")
	require.Zero(t, rc.Timestamp)
}
