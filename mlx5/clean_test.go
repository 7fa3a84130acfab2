package mlx5

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/uverbs"
)

// newFKPeer creates one more RC QP on cq (send and receive), connected
// towards the QP numbered peer, and puts it in the device model.
func (p *fkPair) newFKPeer(t *testing.T, cq *uverbs.CQ, peer uint32) (*uverbs.QP, *devQP) {
	q, err := p.pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	require.NoError(t, err)
	connectTo(t, q, peer)
	return q, p.k.attach(t, q, cq, cq)
}

// write posts n signalled 8-byte RDMA writes to b's memory on q, with
// wr_ids base, base+1, ..., and lets the device model run them.
func (p *fkPair) write(t *testing.T, q *uverbs.QP, d *devQP, base uint64, n int) {
	wrs := make([]uverbs.SendWR, n)
	for i := range wrs {
		wrs[i] = uverbs.SendWR{WRID: base + uint64(i), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
			RemoteAddr: memAddr(p.memB[512:]), RKey: p.mrB.RKey(), SGL: []uverbs.SGE{p.sgeA(0, 8)}}
	}
	got, err := q.PostSend(wrs)
	require.NoError(t, err)
	require.Equal(t, n, got)
	require.NoError(t, p.k.dev.ring(d))
}

// Completions pending for two QPs of one CQ; destroying one drops its CQEs
// (rdma-core __mlx5_cq_clean) and the poll returns exactly the other's, in
// order, with the consumer index moved past the dropped ones.
func TestCQCleanOnQPDestroy(t *testing.T) {
	overBoth(t, func(t *testing.T, ioctl bool) {
		p := newFKPair(t, ioctl, 16, 16, 31, false)
		x, dx := p.newFKPeer(t, p.cqA, p.b.QPN())
		// Interleaved: a, x, a, x, ... so the clean has to move CQEs.
		for i := 0; i < 4; i++ {
			p.write(t, p.a, p.da, uint64(100+2*i), 2)
			p.write(t, x, dx, uint64(900+i), 1)
		}
		c := p.cqA.Driver().(*cq)
		ci := c.ring.consIndex
		require.NoError(t, x.Close())
		require.Equal(t, ci+4, c.ring.consIndex, "the 4 CQEs of x were consumed by the clean")
		require.Equal(t, be32(c.ring.consIndex), c.ring.dbrec[cqSetCI], "and the CQ doorbell record says so")
		wc := pollN(t, p.cqA, 8)
		for i, w := range wc {
			require.Equal(t, uverbs.WC{WRID: uint64(100 + i), Opcode: uverbs.WCRDMAWrite, QPN: p.a.QPN()}, w, "wc %d", i)
		}
		// The CQ keeps working across the wrap with the moved CQEs behind it.
		for i := 0; i < 10; i++ {
			p.write(t, p.a, p.da, uint64(1000+3*i), 3)
			wc = pollN(t, p.cqA, 3)
			require.Equal(t, uint64(1000+3*i+2), wc[2].WRID)
		}
	})
}

// A QP on an SRQ destroyed with receive completions pending returns their
// WQEs to the SRQ's free list (free_res_cqe's mlx5_free_srq_wqe): the SRQ
// holds as many receives again as before.
func TestCQCleanReturnsSRQWQEs(t *testing.T) {
	overBoth(t, func(t *testing.T, ioctl bool) {
		p := newFKPair(t, ioctl, 16, 0, 31, false, 7)
		recv := func(n int) (int, error) {
			wrs := make([]uverbs.RecvWR, n)
			for i := range wrs {
				wrs[i] = uverbs.RecvWR{WRID: uint64(i), SGL: []uverbs.SGE{p.sgeB(64*i, 64)}}
			}
			return p.srq.PostRecv(wrs)
		}
		n, err := recv(7)
		require.NoError(t, err)
		require.Equal(t, 7, n)
		_, err = recv(1)
		require.ErrorIs(t, err, ErrQueueFull, "the SRQ holds 7")
		for i := 0; i < 3; i++ {
			p.send(t, uverbs.SendWR{WRID: uint64(i), Opcode: uverbs.WRSend, SGL: []uverbs.SGE{p.sgeA(0, 16)}})
		}
		require.Equal(t, uint32(3), p.db.srqHW, "b consumed 3 SRQ WQEs, their CQEs unpolled")
		require.NoError(t, p.b.Close())
		wc := make([]uverbs.WC, 4)
		got, err := p.cqB.Poll(wc)
		require.NoError(t, err)
		require.Zero(t, got, "b's receive completions went with it")
		n, err = recv(4)
		require.ErrorIs(t, err, ErrQueueFull)
		require.Equal(t, 3, n, "the 3 WQEs came back to the free list")
	})
}

// A poller runs while QPs sharing its CQ are created, complete work and
// are destroyed: it never gets an error (no CQE naming a forgotten user
// index), never a completion of a QP that was destroyed before the poll
// began, and every completion of the surviving QP. Run with -race.
func TestCQCleanConcurrentPoller(t *testing.T) {
	overBoth(t, func(t *testing.T, ioctl bool) {
		p := newFKPair(t, ioctl, 16, 16, 63, false)
		var (
			gone    atomic.Uint32 // QPN of the last QP whose Close returned
			stop    atomic.Bool
			wg      sync.WaitGroup
			fromA   atomic.Int64
			pollErr error // set before failed
			failed  atomic.Bool
		)
		wg.Add(1)
		go func() {
			defer wg.Done()
			wc := make([]uverbs.WC, 8)
			for !stop.Load() || fromA.Load() < 20*4 {
				dead := gone.Load()
				n, err := p.cqA.Poll(wc)
				if err != nil {
					pollErr = err
					failed.Store(true)
					return
				}
				for _, w := range wc[:n] {
					// QPNs grow: every x numbered up to dead is destroyed.
					if w.Status != uverbs.WCSuccess || (w.QPN != p.a.QPN() && w.QPN <= dead) {
						pollErr = &uverbs.Error{Op: "poll", Err: errWC(w)}
						failed.Store(true)
						return
					}
					if w.QPN == p.a.QPN() {
						fromA.Add(1)
					}
				}
			}
		}()
		for round := 0; round < 20; round++ {
			x, dx := p.newFKPeer(t, p.cqA, p.b.QPN())
			p.write(t, p.a, p.da, uint64(round*100), 2)
			p.write(t, x, dx, uint64(round*100+50), 3)
			p.write(t, p.a, p.da, uint64(round*100+2), 2)
			require.NoError(t, x.Close())
			gone.Store(x.QPN())
			for fromA.Load() < int64(4*(round+1)) && !failed.Load() { // a's SQ drains before the next round
				runtime.Gosched()
			}
		}
		stop.Store(true)
		wg.Wait()
		require.NoError(t, pollErr)
		require.Equal(t, int64(20*4), fromA.Load(), "every completion of the surviving QP")
	})
}

type errWC uverbs.WC

func (e errWC) Error() string { return "unexpected completion" }
