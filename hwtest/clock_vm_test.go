//go:build linux

package hwtest

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/testutil"
	"github.com/ibgo/ibgo/uverbs"
)

// TestCompletionClock checks the device's completion clock the way the
// aeron:ib media timestamps use it. rxe has none: CompletionClock and a
// timestamped CQ are refused (ErrNotSupported, EOPNOTSUPP). An mlx5 has
// one: a timestamped CQ under an RC QP pair looped through the port
// stamps each completion, and the clock converts the stamps to wall-clock
// times in completion order, near the host's clock (logged: the HCA's PTP
// clock agrees with CLOCK_REALTIME only when synchronised). This is the
// hardware check docs/hardware.md names.
func TestCompletionClock(t *testing.T) {
	vm := testutil.VM(t)
	c, err := uverbs.Open(vm.Dev)
	require.NoError(t, err)
	defer c.Close()
	clk, err := c.CompletionClock()
	drv := c.Device().Driver
	if drv != "mlx5" {
		require.ErrorIs(t, err, uverbs.ErrNotSupported, "%s has no completion clock", drv)
		var ue *uverbs.Error
		require.True(t, errors.As(err, &ue), "%T", err)
		t.Logf("%s: %v: media timestamps are software times", drv, err)
		_, err = c.CreateCQ(uverbs.CQInitAttr{CQE: 4, Timestamps: true})
		require.ErrorIs(t, err, syscall.EOPNOTSUPP, "%s refuses a timestamped CQ", drv)
		return
	}
	require.NoError(t, err, "an mlx5 with the clock-info page has a completion clock")
	a, err := c.QueryDevice()
	require.NoError(t, err)
	t.Logf("%s: completion_timestamp_mask %#x, hca_core_clock %d kHz", vm.Dev, a.CompletionTimestampMask, a.HCACoreClock)

	pd, err := c.AllocPD()
	require.NoError(t, err)
	defer pd.Close()
	cq, err := c.CreateCQ(uverbs.CQInitAttr{CQE: 16, Timestamps: true})
	require.NoError(t, err)
	defer cq.Close()
	require.True(t, cq.Timestamps())
	cp := uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}
	qa, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: cp})
	require.NoError(t, err, "a QP on a free-running-timestamp CQ (refused by an mlx5 with only the real-time format)")
	defer qa.Close()
	qz, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: cp})
	require.NoError(t, err)
	defer qz.Close()

	pa, err := c.QueryPort(1)
	require.NoError(t, err)
	var gidx uint8
	var gid uverbs.GID
	if vm.IP != "" {
		gid, err = uverbs.ParseGID(vm.IP)
		require.NoError(t, err)
		gidx, err = c.GIDIndexForIP(1, gid)
		require.NoError(t, err)
	} else {
		e, err := c.QueryGID(1, 0)
		require.NoError(t, err)
		gid = e.GID
	}
	params := uverbs.ConnectParams{SGIDIndex: gidx, MTU: min(pa.ActiveMTU, uverbs.MTU1024)}
	require.NoError(t, qa.Connect(uverbs.Endpoint{QPN: qz.QPN(), PSN: 200, GID: gid, LID: pa.LID}, 100, params))
	require.NoError(t, qz.Connect(uverbs.Endpoint{QPN: qa.QPN(), PSN: 100, GID: gid, LID: pa.LID}, 200, params))

	mem, err := uverbs.AllocMemory(4096, uverbs.MemoryOptions{})
	require.NoError(t, err)
	defer mem.Close()
	mr, err := pd.RegMR(mem.Bytes(), uverbs.AccessLocalWrite)
	require.NoError(t, err)
	defer mr.Close()
	_, err = qz.PostRecv([]uverbs.RecvWR{{WRID: 2, SGL: []uverbs.SGE{mr.SGE(2048, 2048)}}})
	require.NoError(t, err)
	before := time.Now().UnixNano()
	_, err = qa.PostSend([]uverbs.SendWR{{WRID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{mr.SGE(0, 64)}}})
	require.NoError(t, err)

	var got []uverbs.WC
	wc := make([]uverbs.WC, 4)
	for end := time.Now().Add(10 * time.Second); len(got) < 2; {
		n, err := cq.Poll(wc)
		require.NoError(t, err)
		got = append(got, wc[:n]...)
		require.False(t, time.Now().After(end), "waited 10 s for 2 completions, got %+v", got)
	}
	after := time.Now().UnixNano()
	var prev int64
	for _, w := range got {
		require.Equal(t, uverbs.WCSuccess, w.Status, w.Status.String())
		require.NotZero(t, w.Timestamp, "WRID %d: no completion timestamp", w.WRID)
		ns, ok := clk.WallNS(w.Timestamp)
		require.True(t, ok, "WRID %d: raw %#x not converted", w.WRID, w.Timestamp)
		require.GreaterOrEqual(t, ns, prev, "completion times in completion order")
		prev = ns
		t.Logf("WRID %d: raw %#x = %d ns; host clock [%d, %d]: %v from the post", w.WRID, w.Timestamp, ns, before, after, time.Duration(ns-before))
		require.Less(t, abs(ns-before), int64(time.Minute), "the HCA's clock is more than a minute from the host's: is its PHC set?")
	}
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
