package uverbs

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
)

// shiftClock is a CompletionClock that adds a base to the raw stamp.
type shiftClock struct{ base int64 }

func (c shiftClock) WallNS(raw uint64) (int64, bool) { return c.base + int64(raw), raw != 0 }

// wallProv is a provider with wall-clock completion timestamps (or, with
// err set, one whose device lacks them); it records what NewCQ saw.
type wallProv struct {
	*fakeProv
	clk   CompletionClock
	err   error
	newCQ []CQInitAttr
	drv   CQDriver // NewCQ's answer when set
}

func (p *wallProv) WallClockCompletionClock() (CompletionClock, error) { return p.clk, p.err }
func (p *wallProv) FormatFWVer(uint64) string                          { return "" }
func (p *wallProv) NewCQ(a *CQInitAttr) (CQDriver, error) {
	p.newCQ = append(p.newCQ, *a)
	if p.drv != nil {
		return p.drv, nil
	}
	return p.fakeProv.NewCQ(a)
}

// stampedCQ completes once, with a stamp.
type stampedCQ struct {
	fakeCQ
	ts   uint64
	done bool
}

func (f *stampedCQ) Poll(wc []WC) (int, error) {
	if f.done || len(wc) == 0 {
		return 0, nil
	}
	f.done = true
	wc[0] = WC{WRID: 3, Timestamp: f.ts}
	return 1, nil
}

// sentCQFlags reads back the commands an accepting fake kernel got and
// returns each one's number and, for EX_CREATE_CQ, its flags.
func sentCQFlags(t *testing.T, k *fakeKernel) (cmds []uint32, flags []uint32) {
	t.Helper()
	k.w.Close()
	buf := make([]byte, 1<<16)
	n, err := sys.Read(k.r, buf)
	if err != nil && n == 0 {
		return nil, nil // nothing was written: EOF
	}
	b := buf[:n]
	for len(b) >= 8 {
		h := abi.As[abi.CmdHdr](b)
		cmds = append(cmds, h.Command)
		size := int(h.InWords) * 4
		if h.Command&abi.IB_USER_VERBS_CMD_FLAG_EXTENDED != 0 {
			size = 8 + 16 + int(h.InWords)*8 + int(abi.As[abi.ExCmdHdr](b[8:]).ProviderInWords)*8
			if h.Command&^abi.IB_USER_VERBS_CMD_FLAG_EXTENDED == abi.IB_USER_VERBS_EX_CMD_CREATE_CQ {
				flags = append(flags, abi.As[abi.ExCreateCQ](b[24:]).Flags)
			}
		}
		require.GreaterOrEqual(t, len(b), size)
		b = b[size:]
	}
	return cmds, flags
}

// A wall-clock CQ on a provider that has them: the extended CREATE_CQ with
// IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION (as libibverbs sends for
// IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK), the provider sees
// WallClock, and the CQ converts through the provider's clock.
func TestCreateCQWallClock(t *testing.T) {
	clk := shiftClock{base: 1_700_000_000_000_000_000}
	p := &wallProv{fakeProv: &fakeProv{cq: &fakeCQ{}}, clk: clk}
	k := newFakeKernel(t, true, p)
	got, err := k.c.WallClockCompletionClock()
	require.NoError(t, err)
	require.Equal(t, clk, got)

	cq, err := k.c.CreateCQ(CQInitAttr{CQE: 4, WallClock: true})
	require.NoError(t, err)
	require.Equal(t, TimestampWallClock, cq.TimestampFormat())
	require.Equal(t, "wall-clock", cq.TimestampFormat().String())
	require.False(t, cq.Timestamps(), "not the free-running format")
	cc, err := cq.CompletionClock()
	require.NoError(t, err)
	ns, ok := cc.WallNS(5)
	require.True(t, ok)
	require.Equal(t, int64(1_700_000_000_000_000_005), ns)
	require.Len(t, p.newCQ, 1)
	require.True(t, p.newCQ[0].WallClock, "the provider's NewCQ sees WallClock")
	require.False(t, p.newCQ[0].Timestamps)

	cmds, flags := sentCQFlags(t, k)
	require.Equal(t, []uint32{abi.IB_USER_VERBS_CMD_FLAG_EXTENDED | abi.IB_USER_VERBS_EX_CMD_CREATE_CQ}, cmds)
	require.Equal(t, []uint32{abi.IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION}, flags)
}

// Without wall-clock timestamps (a provider without the interface, as rxe,
// or a device that says no, as an mlx5 without the real-time format) the
// CQ is refused with ErrNotSupported before any command or provider state.
func TestCreateCQWallClockRefused(t *testing.T) {
	noRT := errors.New("no real-time clock format")
	for name, prov := range map[string]func(*fakeCQ) ProviderContext{
		"provider": func(d *fakeCQ) ProviderContext { return &fakeProv{cq: d} },
		"device": func(d *fakeCQ) ProviderContext {
			return &wallProv{fakeProv: &fakeProv{cq: d}, err: errors.Join(ErrNotSupported, noRT)}
		},
	} {
		t.Run(name, func(t *testing.T) {
			drv := &fakeCQ{}
			k := newFakeKernel(t, true, prov(drv))
			_, err := k.c.WallClockCompletionClock()
			require.ErrorIs(t, err, ErrNotSupported)
			var ue *Error
			require.ErrorAs(t, err, &ue)
			require.Equal(t, "wall-clock completion clock", ue.Op)

			_, err = k.c.CreateCQ(CQInitAttr{CQE: 4, WallClock: true})
			require.ErrorIs(t, err, ErrNotSupported)
			require.ErrorAs(t, err, &ue)
			require.Equal(t, "create cq", ue.Op)
			require.Equal(t, "fake0", ue.Device)
			if wp, ok := k.c.prov.(*wallProv); ok {
				require.ErrorIs(t, err, noRT, "the provider's reason")
				require.Empty(t, wp.newCQ, "the provider's NewCQ never ran")
			}
			require.Empty(t, drv.calls)
			require.Zero(t, drv.destroyed)
			require.Empty(t, k.c.LiveObjects())
			cmds, _ := sentCQFlags(t, k)
			require.Empty(t, cmds, "no command sent")
		})
	}
}

// One format per CQ: Timestamps (or WCExCompletionTimestamp) with
// WallClock is EINVAL, before any command.
func TestCreateCQBothFormats(t *testing.T) {
	p := &wallProv{fakeProv: &fakeProv{cq: &fakeCQ{}}, clk: shiftClock{}}
	k := newFakeKernel(t, true, p)
	_, err := k.c.CreateCQ(CQInitAttr{CQE: 4, WallClock: true, Timestamps: true})
	require.ErrorIs(t, err, sys.EINVAL)
	_, err = k.c.CreateCQ(CQInitAttr{CQE: 4, WallClock: true, WCFlags: WCExStandard | WCExCompletionTimestamp})
	require.ErrorIs(t, err, sys.EINVAL)
	require.Empty(t, p.newCQ)
	cmds, _ := sentCQFlags(t, k)
	require.Empty(t, cmds)
}

// A CQ without timestamps has no completion clock, and says so; the
// free-running and plain CQs report their formats.
func TestCQTimestampFormat(t *testing.T) {
	k := newFakeKernel(t, true, &fakeProv{cq: &fakeCQ{}})
	plain, err := k.c.CreateCQ(CQInitAttr{CQE: 4})
	require.NoError(t, err)
	require.Equal(t, TimestampNone, plain.TimestampFormat())
	_, err = plain.CompletionClock()
	require.ErrorIs(t, err, ErrNotSupported)
	require.ErrorContains(t, err, "created without completion timestamps")

	fr, err := k.c.CreateCQ(CQInitAttr{CQE: 4, Timestamps: true})
	require.NoError(t, err)
	require.Equal(t, TimestampFreeRunning, fr.TimestampFormat())
	require.True(t, fr.Timestamps())
	require.Equal(t, "free-running", fr.TimestampFormat().String())
	require.Equal(t, "none", TimestampNone.String())
	require.Equal(t, "TimestampFormat(9)", TimestampFormat(9).String())

	_, flags := sentCQFlags(t, k)
	require.Equal(t, []uint32{abi.IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION}, flags, "only the timestamped CQ took the extended command")
}

// WCExCompletionTimestampWallclock as libmlx5 reads it: the device's
// wall-clock format when it has one, and ReadCompletionWallclockNS gives
// the converted time of the current completion; with
// WCExCompletionTimestamp as well, or on a device without the format, the
// free-running stamps and the context's completion clock, refused when
// there is none (this fake kernel's QUERY_DEVICE reports no timestamp
// mask) before the create command.
func TestCQExWallclockFlag(t *testing.T) {
	drv := &stampedCQ{ts: 42}
	p := &wallProv{fakeProv: &fakeProv{cq: &fakeCQ{}}, clk: shiftClock{base: 1_000}, drv: drv}
	k := newFakeKernel(t, true, p)
	cq, err := k.c.CreateCQ(CQInitAttr{CQE: 4, WCFlags: WCExStandard | WCExCompletionTimestampWallclock})
	require.NoError(t, err)
	require.Equal(t, TimestampWallClock, cq.TimestampFormat())
	require.True(t, p.newCQ[0].WallClock)
	require.NoError(t, cq.StartPoll())
	require.Equal(t, uint64(42), cq.ReadCompletionTS())
	require.Equal(t, uint64(1_042), cq.ReadCompletionWallclockNS())
	require.Zero(t, testing.AllocsPerRun(100, func() { cq.ReadCompletionWallclockNS() }))
	cq.EndPoll()

	plain, err := k.c.CreateCQ(CQInitAttr{CQE: 4, WCFlags: WCExStandard})
	require.NoError(t, err)
	require.Zero(t, plain.ReadCompletionWallclockNS(), "not asked for")

	_, err = k.c.CreateCQ(CQInitAttr{CQE: 4, WCFlags: WCExStandard | WCExCompletionTimestamp | WCExCompletionTimestampWallclock})
	require.ErrorIs(t, err, ErrNotSupported, "the free-running format needs a completion clock")
	require.ErrorContains(t, err, "WCExCompletionTimestampWallclock")
	require.Len(t, p.newCQ, 2, "the refused CQ never reached the provider")

	p.err, p.clk = errors.Join(ErrNotSupported, errors.New("no real-time format")), nil
	_, err = k.c.CreateCQ(CQInitAttr{CQE: 4, WCFlags: WCExCompletionTimestampWallclock})
	require.ErrorIs(t, err, ErrNotSupported, "no wall-clock format and no completion clock")
	require.Len(t, p.newCQ, 2)
	_, err = k.c.CreateCQ(CQInitAttr{CQE: 4, WallClock: true, WCFlags: WCExCompletionTimestampWallclock})
	require.ErrorIs(t, err, ErrNotSupported, "WallClock asked for explicitly: no free-running fallback")
	require.ErrorContains(t, err, "no real-time format")
	require.Len(t, p.newCQ, 2)

	cmds, flags := sentCQFlags(t, k)
	require.Equal(t, []uint32{abi.IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION}, flags, "one timestamped CQ was created")
	ex := uint32(abi.IB_USER_VERBS_CMD_FLAG_EXTENDED)
	require.Equal(t, []uint32{ex | abi.IB_USER_VERBS_EX_CMD_CREATE_CQ, abi.IB_USER_VERBS_CMD_CREATE_CQ,
		ex | abi.IB_USER_VERBS_EX_CMD_QUERY_DEVICE, ex | abi.IB_USER_VERBS_EX_CMD_QUERY_DEVICE}, cmds,
		"the two CQs, and an EX_QUERY_DEVICE (CompletionClock) before each refusal")
}
