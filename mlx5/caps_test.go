package mlx5

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/uverbs"
)

// QP.Cap, QP.Query, SRQ.MaxWR/MaxSGE and CQ.CQE through uverbs over the
// fake kernel report what libmlx5 reports for the vectors' inputs
// (returned_cap: max_send_wr 21 where the kernel echoes 16), not the
// kernel's echo.
func TestFakeKernelReportedCaps(t *testing.T) {
	overBoth(t, func(t *testing.T, ioctl bool) {
		k := newFakeKernel(t, ioctl)
		ctx, err := k.device().Open()
		require.NoError(t, err)
		defer ctx.Close()
		pd, err := ctx.AllocPD()
		require.NoError(t, err)

		// libmlx5 asks the kernel for the ring's usable size (ncqe-1), which
		// ibv_cq.cqe then reports; cqe_poll.json: 7 -> 7.
		for _, c := range []struct{ in, want int }{{7, 7}, {10, 15}, {16, 31}, {255, 255}} {
			cq, err := ctx.CreateCQ(uverbs.CQInitAttr{CQE: c.in})
			require.NoError(t, err)
			require.Equal(t, c.want, cq.CQE(), "cqe %d", c.in)
			require.NoError(t, cq.Close())
		}
		cq, err := ctx.CreateCQ(uverbs.CQInitAttr{CQE: 64})
		require.NoError(t, err)

		for _, f := range []string{"rc_send.json", "cqe_poll.json", "uc_send.json", "ud_send.json"} {
			var v vSendFile
			loadJSON(t, f, &v)
			q, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPType(v.QP.Type), SendCQ: cq, RecvCQ: cq, Cap: v.QP.Requested.qpCap()})
			require.NoError(t, err)
			want := v.ReturnedCap.qpCap()
			require.Equal(t, want, q.Cap(), "%s: QP.Cap = libmlx5's returned_cap", f)
			if f == "rc_send.json" {
				require.Equal(t, uint32(21), q.Cap().MaxSendWR, "the kernel echoes 16")
			}
			// mlx5_query_qp: send sizes libmlx5's, receive sizes the kernel's
			// (which for a user QP knows no send sizes at all).
			a, init, err := q.Query(uverbs.QPAttrCap)
			require.NoError(t, err)
			require.Equal(t, want, a.Cap, "%s: Query's caps", f)
			require.Equal(t, want, init.Cap, "%s: Query's init caps", f)
			require.NoError(t, q.Close())
		}

		// srq_recv.json: max_wr 15, max_sge 2 asked; the kernel is told 31/3
		// and echoes it; libmlx5 reports 15/3.
		s, err := pd.CreateSRQ(uverbs.SRQInitAttr{MaxWR: 15, MaxSGE: 2})
		require.NoError(t, err)
		require.Equal(t, uint32(15), s.MaxWR())
		require.Equal(t, uint32(3), s.MaxSGE())

		// A receive-only QP on the SRQ and a QP without send WRs: libmlx5
		// builds no SQ (max_send_wr 0, posts fail with ENOMEM) and tells the
		// kernel the inline size asked for.
		q, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, SRQ: s,
			Cap: uverbs.QPCap{MaxSendWR: 0, MaxSendSGE: 1, MaxInlineData: 32}})
		require.NoError(t, err)
		require.Equal(t, uverbs.QPCap{MaxSendSGE: 1, MaxInlineData: 32}, q.Cap())
		d := q.Driver().(*qp)
		require.Zero(t, d.req.SQWQECount)
		require.Zero(t, d.req.RQWQECount)
		_, err = q.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRSend}})
		require.ErrorIs(t, err, ErrQueueFull)
		require.NoError(t, q.Close())
		require.NoError(t, s.Close())
		require.NoError(t, cq.Close())
		require.NoError(t, pd.Close())
		if ioctl {
			k.mu.Lock()
			require.Zero(t, k.writes, "no write(2)")
			require.Equal(t, len(k.cmds), k.invoked, "the rest through INVOKE_WRITE")
			seen := map[[2]uint16]bool{}
			for _, m := range k.methods {
				seen[m] = true
			}
			k.mu.Unlock()
			for _, m := range [][2]uint16{{abi.UVERBS_OBJECT_SRQ, abi.UVERBS_METHOD_SRQ_CREATE},
				{abi.UVERBS_OBJECT_QP, abi.UVERBS_METHOD_QP_DESTROY}, {abi.UVERBS_OBJECT_CQ, abi.UVERBS_METHOD_CQ_DESTROY},
				{abi.UVERBS_OBJECT_SRQ, abi.UVERBS_METHOD_SRQ_DESTROY}, {abi.UVERBS_OBJECT_PD, abi.UVERBS_METHOD_PD_DESTROY}} {
				require.True(t, seen[m], "ioctl method %v", m)
			}
		}
	})
}
