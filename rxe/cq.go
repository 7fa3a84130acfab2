package rxe

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"unsafe"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/uverbs"
)

// cq mirrors rdma-core providers/rxe/rxe.c: rxe_create_cq / rxe_poll_cq.
type cq struct {
	mu   sync.Mutex // guards ring and the consumer index; held across RESIZE_CQ
	ctx  *uverbs.Context
	ring *ring
}

func (c *context) NewCQ(attr *uverbs.CQInitAttr) (uverbs.CQDriver, error) { return &cq{}, nil }

// The kernel requires room for struct rxe_create_cq_resp (the ring's mminfo).
func (q *cq) DriverData() uverbs.DriverData {
	return uverbs.DriverData{OutLen: int(unsafe.Sizeof(abi.RxeCreateCQResp{}))}
}

func (q *cq) Created(c *uverbs.CQ, out []byte) error {
	if len(out) < int(unsafe.Sizeof(abi.RxeCreateCQResp{})) {
		return errors.New("rxe: short create-cq response")
	}
	r, err := mapRing(c.Context(), (*abi.RxeCreateCQResp)(unsafe.Pointer(&out[0])).MI, int(unsafe.Sizeof(abi.WC{})))
	if err != nil {
		return err
	}
	q.ctx, q.ring = c.Context(), r
	return nil
}

// Poll copies completions out of the kernel's ring. It takes no system call
// and allocates nothing. q.mu makes concurrent Polls and a concurrent resize
// (ResizeData..Resized) exclusive; uncontended it costs one CAS and one
// atomic add.
func (q *cq) Poll(wc []uverbs.WC) (int, error) {
	q.mu.Lock()
	r := q.ring
	if r == nil {
		q.mu.Unlock()
		return 0, uverbs.ErrClosed
	}
	n := 0
	for n < len(wc) && !r.empty() {
		k := (*abi.WC)(r.consumerSlot())
		w := &wc[n]
		w.WRID = k.WRID
		w.Status = uverbs.WCStatus(k.Status)
		w.Opcode = uverbs.WCOpcode(k.Opcode)
		w.VendorErr = k.VendorErr
		w.ByteLen = k.ByteLen
		w.Flags = uverbs.WCFlags(k.WCFlags)
		if w.Flags&uverbs.WCWithImm != 0 {
			w.Imm = bits.ReverseBytes32(k.Ex) // imm_data is big-endian
		} else {
			w.Imm = k.Ex
		}
		w.QPN = k.QPNum
		w.SrcQP = k.SrcQP
		w.PkeyIndex = k.PkeyIndex
		w.SLID = k.SLID
		w.SL = k.SL
		w.DLIDPathBits = k.DLIDPathBits
		r.advanceConsumer()
		n++
	}
	q.mu.Unlock()
	return n, nil
}

// ResizeData takes the CQ's lock and keeps it until Resized: during
// RESIZE_CQ the kernel copies the pending completions into the new ring and
// rewrites the old ring's consumer index, so Poll must not run across it
// (rdma-core providers/rxe/rxe.c: rxe_resize_cq holds cq->lock around
// ibv_cmd_resize_cq).
func (q *cq) ResizeData(cqe int) uverbs.DriverData {
	q.mu.Lock()
	return uverbs.DriverData{OutLen: int(unsafe.Sizeof(abi.RxeResizeCQResp{}))}
}

// Resized runs after every RESIZE_CQ that ResizeData began, with the
// command's error. On success it maps the new ring and drops the old one, as
// rxe_resize_cq does; it always releases the lock ResizeData took.
func (q *cq) Resized(c *uverbs.CQ, out []byte, err error) error {
	defer q.mu.Unlock()
	if err != nil {
		return nil // the kernel kept the old ring
	}
	if len(out) < int(unsafe.Sizeof(abi.RxeResizeCQResp{})) {
		return q.lostRing(errors.New("rxe: short resize-cq response"))
	}
	r, err := mapRing(c.Context(), (*abi.RxeResizeCQResp)(unsafe.Pointer(&out[0])).MI, int(unsafe.Sizeof(abi.WC{})))
	if err != nil {
		return q.lostRing(err)
	}
	q.swapRing(r)
	return nil
}

// swapRing installs r; q.mu is held.
func (q *cq) swapRing(r *ring) {
	old := q.ring
	q.ring = r
	old.unmap()
}

// lostRing handles a resize the kernel performed but whose new ring cannot
// be mapped: the old ring no longer receives completions, so polling ends.
func (q *cq) lostRing(err error) error {
	q.ring.unmap()
	q.ring = nil
	return fmt.Errorf("%w; the CQ can no longer be polled", err)
}

func (q *cq) Destroy() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ring.unmap()
	q.ring = nil
	return nil
}
