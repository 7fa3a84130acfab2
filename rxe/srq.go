package rxe

import (
	"errors"
	"unsafe"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
	"github.com/ibgo/ibgo/uverbs"
)

// srq mirrors rdma-core providers/rxe/rxe.c: rxe_create_srq, rxe_modify_srq,
// rxe_post_srq_recv.
type srq struct {
	rq     wq
	srq    *uverbs.SRQ
	newMI  []byte // where the kernel writes the resized queue's mminfo
	maxSGE int
}

func (c *context) NewSRQ(attr *uverbs.SRQInitAttr) (uverbs.SRQDriver, error) {
	return &srq{maxSGE: int(attr.MaxSGE)}, nil
}

func (s *srq) DriverData() uverbs.DriverData {
	return uverbs.DriverData{OutLen: int(unsafe.Sizeof(abi.RxeCreateSRQResp{}))}
}

func (s *srq) Created(q *uverbs.SRQ, out []byte) error {
	if len(out) < int(unsafe.Sizeof(abi.RxeCreateSRQResp{})) {
		return errors.New("rxe: short create-srq response")
	}
	r, err := mapRing(q.Context(), (*abi.RxeCreateSRQResp)(unsafe.Pointer(&out[0])).MI, recvWQESize)
	if err != nil {
		return err
	}
	s.rq.ring, s.rq.maxSGE, s.srq = r, int(q.MaxSGE()), q
	return nil
}

// ModifyData always carries struct rxe_modify_srq_cmd: the kernel requires it
// and, on a resize, writes the new queue's mminfo where it points.
func (s *srq) ModifyData(attr *uverbs.SRQAttr, mask uverbs.SRQAttrMask, scratch func(int) []byte) uverbs.DriverData {
	s.newMI = scratch(int(unsafe.Sizeof(abi.MmInfo{})))
	cmd := make([]byte, unsafe.Sizeof(abi.RxeModifySRQCmd{}))
	(*abi.RxeModifySRQCmd)(unsafe.Pointer(&cmd[0])).MmapInfoAddr = sys.Addr(s.newMI)
	if mask&uverbs.SRQAttrMaxWR != 0 {
		s.rq.mu.Lock() // held until Modified: no posts while the ring moves
	}
	return uverbs.DriverData{In: cmd}
}

func (s *srq) Modified(q *uverbs.SRQ, attr *uverbs.SRQAttr, mask uverbs.SRQAttrMask, _ error) error { // compile shim: H1 implements the new contract
	if mask&uverbs.SRQAttrMaxWR == 0 {
		return nil
	}
	defer s.rq.mu.Unlock()
	mi := *(*abi.MmInfo)(unsafe.Pointer(&s.newMI[0]))
	r, err := mapRing(q.Context(), mi, recvWQESize)
	if err != nil {
		s.rq.ring.unmap()
		s.rq.ring = nil
		return err
	}
	s.rq.ring.unmap()
	s.rq.ring = r
	return nil
}

func (s *srq) PostRecv(wrs []uverbs.RecvWR) (int, error) { return postRecv(&s.rq, wrs) }

func (s *srq) Destroy() error {
	s.rq.mu.Lock()
	defer s.rq.mu.Unlock()
	s.rq.ring.unmap()
	s.rq.ring = nil
	return nil
}

// ah keeps the kernel's AH number, which UD send WQEs carry.
type ah struct{ num uint32 }

func (c *context) NewAH(attr *uverbs.AHAttr) (uverbs.AHDriver, error) { return &ah{}, nil }

func (a *ah) DriverData() uverbs.DriverData {
	return uverbs.DriverData{OutLen: int(unsafe.Sizeof(abi.RxeCreateAHResp{}))}
}

func (a *ah) Created(h *uverbs.AH, out []byte) error {
	if len(out) >= int(unsafe.Sizeof(abi.RxeCreateAHResp{})) {
		a.num = (*abi.RxeCreateAHResp)(unsafe.Pointer(&out[0])).AHNum
	}
	return nil
}
