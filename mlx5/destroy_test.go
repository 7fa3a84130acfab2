package mlx5

import (
	"errors"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/uverbs"
)

// destroyRig is a QP, CQ and SRQ made by a Context as uverbs would make
// them, with the QP's BlueFlame register in plain memory (no device).
type destroyRig struct {
	c   *Context
	qp  *qp
	cq  *cq
	srq *srq
	uar []byte
}

func newDestroyRig(t *testing.T) *destroyRig {
	t.Helper()
	c := testContext()
	t.Cleanup(func() { c.Close() })
	r := &destroyRig{c: c, uar: alignedMem(4096)}
	attr := uverbs.QPInitAttr{Type: uverbs.QPTypeRC, Cap: uverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}}
	d, err := c.NewQP(&attr)
	require.NoError(t, err)
	r.qp = d.(*qp)
	r.qp.sq.bf = &bfReg{reg: unsafe.Pointer(&r.uar[bfOffset]), bufSize: 256, uuarn: 1}
	r.qp.sq.local, r.qp.rq.local = testLocal, testLocal
	cd, err := c.NewCQ(&uverbs.CQInitAttr{CQE: 15})
	require.NoError(t, err)
	r.cq = cd.(*cq)
	sd, err := c.NewSRQ(&uverbs.SRQInitAttr{MaxWR: 8, MaxSGE: 1})
	require.NoError(t, err)
	r.srq = sd.(*srq)
	return r
}

// After Destroy a post or poll returns ErrClosed instead of touching the
// unmapped buffer (the ProviderContext contract rxe also keeps); a second
// Destroy is harmless.
func TestDestroyThenPostPollClosed(t *testing.T) {
	r := newDestroyRig(t)
	_, err := r.qp.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRSend}})
	require.NoError(t, err, "a post before Destroy works")
	require.NoError(t, r.qp.Destroy())
	require.NoError(t, r.cq.Destroy())
	require.NoError(t, r.srq.Destroy())

	_, err = r.qp.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRSend}})
	require.ErrorIs(t, err, uverbs.ErrClosed)
	_, err = r.qp.PostRecv([]uverbs.RecvWR{{WRID: 1}})
	require.ErrorIs(t, err, uverbs.ErrClosed)
	_, err = r.cq.Poll(make([]uverbs.WC, 4))
	require.ErrorIs(t, err, uverbs.ErrClosed)
	_, err = r.srq.PostRecv([]uverbs.RecvWR{{WRID: 1}})
	require.ErrorIs(t, err, uverbs.ErrClosed)
	r.srq.q.free(0) // a CQ poll returning a WQE after Destroy does nothing

	require.NoError(t, r.qp.Destroy())
	require.NoError(t, r.cq.Destroy())
	require.NoError(t, r.srq.Destroy())
}

// Posts and polls racing Destroy either finish before the buffers go or
// return ErrClosed (run with -race: Destroy used to unmap and clear the
// BlueFlame register without the queue locks).
func TestDestroyConcurrentWithPostPoll(t *testing.T) {
	for round := 0; round < 20; round++ {
		r := newDestroyRig(t)
		var wg sync.WaitGroup
		start := make(chan struct{})
		run := func(f func() error) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := 0; i < 200; i++ {
					if err := f(); err != nil {
						if errors.Is(err, uverbs.ErrClosed) {
							return
						}
						if !errors.Is(err, ErrQueueFull) {
							t.Errorf("round %d: %v", round, err)
							return
						}
					}
				}
			}()
		}
		send := []uverbs.SendWR{{Opcode: uverbs.WRSend}}
		recv := []uverbs.RecvWR{{WRID: 1}}
		wc := make([]uverbs.WC, 4)
		run(func() error { _, err := r.qp.PostSend(send); return err })
		run(func() error { _, err := r.qp.PostRecv(recv); return err })
		run(func() error { _, err := r.srq.PostRecv(recv); return err })
		run(func() error { _, err := r.cq.Poll(wc); return err })
		close(start)
		time.Sleep(time.Duration(round%4) * 10 * time.Microsecond)
		require.NoError(t, r.qp.Destroy())
		require.NoError(t, r.srq.Destroy())
		require.NoError(t, r.cq.Destroy())
		wg.Wait()
	}
}

// ReqNotify after the CQ was destroyed (a CQ.Close or Context.Close that
// won the race) returns ErrClosed and writes neither the doorbell record
// nor the UAR: the arm runs under the lock Destroy takes, so it happens
// wholly before Destroy or not at all (issue 30, item 3). A race between
// the two, under the race detector, ends without a fault.
func TestReqNotifyAfterDestroy(t *testing.T) {
	r := newDestroyRig(t)
	r.cq.ring.uar = unsafe.Pointer(&r.uar[0])
	require.NoError(t, r.cq.ReqNotify(true), "an arm before Destroy works")
	armed := r.cq.ring.dbrec[cqArmDB]
	require.NotZero(t, armed, "a solicited-only arm names its command")
	uar := append([]byte(nil), r.uar[cqDBOff:cqDBOff+8]...)
	require.NoError(t, r.cq.Destroy())
	require.ErrorIs(t, r.cq.ReqNotify(false), uverbs.ErrClosed)
	require.Equal(t, armed, r.cq.ring.dbrec[cqArmDB], "the doorbell record was not written")
	require.Equal(t, uar, r.uar[cqDBOff:cqDBOff+8], "nor the UAR")

	for range 50 {
		r := newDestroyRig(t)
		r.cq.ring.uar = unsafe.Pointer(&r.uar[0])
		done := make(chan error, 1)
		go func() {
			for {
				if err := r.cq.ReqNotify(false); err != nil {
					done <- err
					return
				}
			}
		}()
		require.NoError(t, r.cq.Destroy())
		require.ErrorIs(t, <-done, uverbs.ErrClosed)
	}
}
