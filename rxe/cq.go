package rxe

import (
	"errors"
	"math/bits"
	"sync"
	"unsafe"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/uverbs"
)

// cq mirrors rdma-core providers/rxe/rxe.c: rxe_create_cq / rxe_poll_cq.
type cq struct {
	mu   sync.Mutex
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
// and allocates nothing.
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

func (q *cq) ResizeData(cqe int) uverbs.DriverData {
	return uverbs.DriverData{OutLen: int(unsafe.Sizeof(abi.RxeResizeCQResp{}))}
}

// Resized maps the new ring (the kernel copied the pending completions into
// it) and drops the old one, as rxe_resize_cq does.
func (q *cq) Resized(c *uverbs.CQ, out []byte, _ error) error { // compile shim: H1 implements the new contract
	if len(out) < int(unsafe.Sizeof(abi.RxeResizeCQResp{})) {
		return errors.New("rxe: short resize-cq response")
	}
	r, err := mapRing(c.Context(), (*abi.RxeResizeCQResp)(unsafe.Pointer(&out[0])).MI, int(unsafe.Sizeof(abi.WC{})))
	if err != nil {
		return err
	}
	q.mu.Lock()
	old := q.ring
	q.ring = r
	q.mu.Unlock()
	old.unmap()
	return nil
}

func (q *cq) Destroy() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ring.unmap()
	q.ring = nil
	return nil
}
