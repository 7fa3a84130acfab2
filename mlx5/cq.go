package mlx5

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/ibgo/ibgo/internal/mmio"
	"github.com/ibgo/ibgo/internal/sys"
	"github.com/ibgo/ibgo/uverbs"
)

// CQE opcodes (op_own >> 4) and fields of struct mlx5_cqe64 (mlx5dv.h).
const (
	cqeReq         = 0
	cqeRespWrImm   = 1
	cqeRespSend    = 2
	cqeRespSendImm = 3
	cqeRespSendInv = 4
	cqeResizeCQ    = 5
	cqeReqErr      = 13
	cqeRespErr     = 14
	cqeInvalid     = 15

	cqeOwnerMask       = 1
	cqeInlineScatter32 = 0x4 // MLX5_INLINE_SCATTER_32
	cqeInlineScatter64 = 0x8 // MLX5_INLINE_SCATTER_64
	cqeFormatMask      = 0xc
	cqeCompressed      = 0xc // MLX5_COMPRESSED << 2

	cqeSize64 = 64

	offMLPath    = 17
	offSLID      = 22
	offFlagsRQPN = 24
	offSrqnUidx  = 32
	offImmInval  = 36
	offByteCnt   = 44
	offTimestamp = 48
	offVendorErr = 54
	offSyndrome  = 55
	offSopDropQP = 56
	offWQECtr    = 60
	offOpOwn     = 63

	cqDBReqNotSol = 1 << 24 // MLX5_CQ_DB_REQ_NOT_SOL
)

// ErrCQECompression: a CQE in the compressed format arrived. This provider
// never asks for compression (cqe_comp_en 0), so it is a device or driver
// error, reported rather than misparsed.
var ErrCQECompression = errors.New("mlx5: compressed CQE (CQE compression was not requested)")

// resource is what a cqe_version 1 user index names: rdma-core struct
// mlx5_resource for a QP.
type resource struct {
	qpn uint32
	typ uverbs.QPType
	sq  *sendQueue
	rq  *recvQueue
	srq *srqQueue
}

// rscTable maps user indexes to QPs: rdma-core's uidx table
// (mlx5_store_uidx/mlx5_find_uidx), one per context. CQ polls read it
// without a lock while QPs are created and destroyed under the context's:
// stores publish a new copy of the table (creation is rare, lookups are
// per CQE).
type rscTable struct {
	tab  atomic.Pointer[[]*resource]
	free []uint32
}

// store assigns the lowest free user index (libmlx5 hands them out from 0).
// Callers serialise store and clear.
func (t *rscTable) store(r *resource) (uint32, error) {
	var cur []*resource
	if p := t.tab.Load(); p != nil {
		cur = *p
	}
	next := append([]*resource(nil), cur...)
	var i uint32
	if n := len(t.free); n > 0 {
		i = t.free[n-1]
		t.free = t.free[:n-1]
		next[i] = r
	} else {
		if len(cur) >= 0xffffff {
			return 0, postErr("create qp", syscall.ENOMEM, "no free user index")
		}
		i = uint32(len(cur))
		next = append(next, r)
	}
	t.tab.Store(&next)
	return i, nil
}

func (t *rscTable) clear(uidx uint32) {
	p := t.tab.Load()
	if p == nil || int(uidx) >= len(*p) || (*p)[uidx] == nil {
		return
	}
	next := append([]*resource(nil), (*p)...)
	next[uidx] = nil
	t.tab.Store(&next)
	t.free = append(t.free, uidx)
}

func (t *rscTable) find(uidx uint32) *resource {
	if p := t.tab.Load(); p != nil && int(uidx) < len(*p) {
		return (*p)[uidx]
	}
	return nil
}

// cqRing is a CQ's ring and doorbells: rdma-core struct mlx5_cq.
type cqRing struct {
	buf       unsafe.Pointer
	ncqe      uint32 // a power of two
	consIndex uint32
	dbrec     *[2]uint32
	cqn       uint32
	armSN     uint32
	uar       unsafe.Pointer // the UAR page whose +0x20 is the CQ doorbell
	rsc       *rscTable
	ts        []uint64 // when set, poll stores each CQE's timestamp here
	stamps    bool     // the CQ was created with completion timestamps: fill WC.Timestamp

	// Tails advanced during one poll, published once per queue and poll
	// (an atomic store is a locked instruction on amd64).
	pendSQ     *sendQueue
	pendSQTail uint32
	pendRQ     *recvQueue
	pendRQTail uint32
}

func (c *cqRing) retireSQ(sq *sendQueue, tail uint32) {
	if c.pendSQ != sq {
		c.flushSQ()
		c.pendSQ = sq
	}
	c.pendSQTail = tail
}

func (c *cqRing) flushSQ() {
	if c.pendSQ != nil {
		c.pendSQ.tail.Store(c.pendSQTail)
		c.pendSQ = nil
	}
}

// nextRQ returns the RQ's tail and advances it by one.
func (c *cqRing) nextRQ(rq *recvQueue) uint32 {
	if c.pendRQ != rq {
		c.flushRQ()
		c.pendRQ, c.pendRQTail = rq, rq.tail.Load()
	}
	t := c.pendRQTail
	c.pendRQTail++
	return t
}

func (c *cqRing) flushRQ() {
	if c.pendRQ != nil {
		c.pendRQ.tail.Store(c.pendRQTail)
		c.pendRQ = nil
	}
}

func (c *cqRing) cqe(i uint32) unsafe.Pointer {
	return unsafe.Add(c.buf, uintptr(i&(c.ncqe-1))*cqeSize64)
}

// initCQEs marks every CQE invalid and hardware-owned for the first pass
// (op_own = MLX5_CQE_INVALID << 4), as rdma-core verbs.c: mlx5_create_cq.
func (c *cqRing) initCQEs() {
	for i := uint32(0); i < c.ncqe; i++ {
		*(*uint8)(unsafe.Add(c.cqe(i), offOpOwn)) = cqeInvalid << 4
	}
}

// poll mirrors rdma-core providers/mlx5/cq.c: mlx5_poll_cq and
// mlx5_parse_cqe for cqe_version 1 and 64-byte CQEs.
func (c *cqRing) poll(wc []uverbs.WC) (int, error) {
	if c.buf == nil { // destroyed (cq.Destroy, under the CQ's lock)
		return 0, uverbs.ErrClosed
	}
	var err error
	n := 0
	for ; n < len(wc); n++ {
		cqe := c.cqe(c.consIndex)
		opOwn := *(*uint8)(unsafe.Add(cqe, offOpOwn))
		hwOwner := uint8(0)
		if c.consIndex&c.ncqe != 0 {
			hwOwner = 1
		}
		if opOwn>>4 == cqeInvalid || opOwn&cqeOwnerMask != hwOwner {
			break
		}
		if opOwn&cqeFormatMask == cqeCompressed {
			err = &uverbs.Error{Op: "poll cq", Err: fmt.Errorf("%w: %w at consumer index %d", sys.NewErrno(syscall.EIO), ErrCQECompression, c.consIndex)}
			break
		}
		c.consIndex++
		mmio.FromDevice()
		if err = c.parse(cqe, opOwn, &wc[n]); err != nil {
			break
		}
		if c.stamps {
			wc[n].Timestamp = be64(*(*uint64)(unsafe.Add(cqe, offTimestamp)))
		}
		if c.ts != nil {
			c.ts[n] = be64(*(*uint64)(unsafe.Add(cqe, offTimestamp)))
		}
	}
	c.flushSQ()
	c.flushRQ()
	// update_cons_index
	c.dbrec[cqSetCI] = be32(c.consIndex & 0xffffff)
	return n, err
}

func (c *cqRing) lookup(cqe unsafe.Pointer) (*resource, error) {
	uidx := get32(cqe, offSrqnUidx) & 0xffffff
	r := c.rsc.find(uidx)
	if r == nil {
		return nil, &uverbs.Error{Op: "poll cq", Err: fmt.Errorf("%w: CQE names user index %#x, which no QP of this context has", sys.NewErrno(syscall.EIO), uidx)}
	}
	raceRetired(unsafe.Pointer(r.sq))
	if r.rq != nil {
		raceRetired(unsafe.Pointer(r.rq))
	}
	if r.srq != nil {
		raceRetired(unsafe.Pointer(r.srq))
	}
	return r, nil
}

func (c *cqRing) parse(cqe unsafe.Pointer, opOwn uint8, wc *uverbs.WC) error {
	*wc = uverbs.WC{QPN: get32(cqe, offSopDropQP) & 0xffffff}
	switch op := opOwn >> 4; op {
	case cqeReq:
		r, err := c.lookup(cqe)
		if err != nil {
			return err
		}
		sq := r.sq
		ctr := uint32(get16(cqe, offWQECtr))
		idx := ctr & (sq.wqeCnt - 1)
		// handle_good_req
		switch get32(cqe, offSopDropQP) >> 24 {
		case opRDMAWriteImm:
			wc.Flags |= uverbs.WCWithImm
			wc.Opcode = uverbs.WCRDMAWrite
		case opRDMAWrite:
			wc.Opcode = uverbs.WCRDMAWrite
		case opSendImm:
			wc.Flags |= uverbs.WCWithImm
			wc.Opcode = uverbs.WCSend
		case opSend, opSendInval:
			wc.Opcode = uverbs.WCSend
		case opRDMARead:
			wc.Opcode = uverbs.WCRDMARead
			wc.ByteLen = get32(cqe, offByteCnt)
		case opAtomicCS:
			wc.Opcode = uverbs.WCCompSwap
			wc.ByteLen = 8
		case opAtomicFA:
			wc.Opcode = uverbs.WCFetchAdd
			wc.ByteLen = 8
		}
		if opOwn&cqeInlineScatter32 != 0 {
			wc.Status = sq.copyToSendWQE(ctr, cqe, wc.ByteLen)
		} else if opOwn&cqeInlineScatter64 != 0 {
			wc.Status = sq.copyToSendWQE(ctr, unsafe.Add(cqe, -cqeSize64), wc.ByteLen)
		}
		wc.WRID = sq.wrid[idx]
		c.retireSQ(sq, sq.wqeHead[idx]+1)
	case cqeRespWrImm, cqeRespSend, cqeRespSendImm, cqeRespSendInv:
		r, err := c.lookup(cqe)
		if err != nil {
			return err
		}
		wc.Status = c.responder(cqe, opOwn, r, wc)
	case cqeResizeCQ:
	case cqeReqErr, cqeRespErr:
		wc.Status = errStatus(*(*uint8)(unsafe.Add(cqe, offSyndrome)))
		wc.VendorErr = uint32(*(*uint8)(unsafe.Add(cqe, offVendorErr)))
		ctr := uint32(get16(cqe, offWQECtr))
		r, err := c.lookup(cqe)
		if err != nil {
			return err
		}
		if op == cqeReqErr {
			idx := ctr & (r.sq.wqeCnt - 1)
			wc.WRID = r.sq.wrid[idx]
			c.retireSQ(r.sq, r.sq.wqeHead[idx]+1)
		} else if r.srq != nil {
			wc.WRID = r.srq.wrid[ctr&(r.srq.max-1)]
			r.srq.free(ctr)
		} else {
			rq := r.rq
			t := c.nextRQ(rq)
			wc.WRID = rq.wrid[t&(rq.wqeCnt-1)]
		}
	default:
		return &uverbs.Error{Op: "poll cq", Err: fmt.Errorf("%w: CQE opcode %d", sys.NewErrno(syscall.EIO), op)}
	}
	return nil
}

// responder mirrors rdma-core cq.c: handle_responder.
func (c *cqRing) responder(cqe unsafe.Pointer, opOwn uint8, r *resource, wc *uverbs.WC) uverbs.WCStatus {
	wc.ByteLen = get32(cqe, offByteCnt)
	var status uverbs.WCStatus
	scatter := unsafe.Pointer(nil)
	if opOwn&cqeInlineScatter32 != 0 {
		scatter = cqe
	} else if opOwn&cqeInlineScatter64 != 0 {
		scatter = unsafe.Add(cqe, -cqeSize64)
	}
	if r.srq != nil {
		ctr := uint32(get16(cqe, offWQECtr))
		wc.WRID = r.srq.wrid[ctr&(r.srq.max-1)]
		if scatter != nil {
			// the WQE's data segments are read before it goes back to
			// the free list, where a post on another goroutine could
			// reuse it mid-copy (issue 30, item 7)
			status = copyToScat(r.srq.local, unsafe.Add(r.srq.wqe(ctr), srqNextSegSize), scatter, wc.ByteLen, r.srq.maxGS)
		}
		r.srq.free(ctr)
	} else {
		rq := r.rq
		t := c.nextRQ(rq)
		idx := t & (rq.wqeCnt - 1)
		wc.WRID = rq.wrid[idx]
		if scatter != nil {
			status = copyToScat(rq.local, rq.wqe(idx), scatter, wc.ByteLen, rq.maxGS)
		}
	}
	if status != uverbs.WCSuccess {
		return status
	}
	switch opOwn >> 4 {
	case cqeRespWrImm:
		wc.Opcode = uverbs.WCRecvRDMAWithImm
		wc.Flags |= uverbs.WCWithImm
		wc.Imm = get32(cqe, offImmInval)
	case cqeRespSend:
		wc.Opcode = uverbs.WCRecv
	case cqeRespSendImm:
		wc.Opcode = uverbs.WCRecv
		wc.Flags |= uverbs.WCWithImm
		wc.Imm = get32(cqe, offImmInval)
	case cqeRespSendInv:
		wc.Opcode = uverbs.WCRecv
		wc.Flags |= uverbs.WCWithInv
		wc.Imm = get32(cqe, offImmInval)
	}
	wc.SLID = get16(cqe, offSLID)
	fr := get32(cqe, offFlagsRQPN)
	wc.SL = uint8(fr>>24) & 0xf
	wc.SrcQP = fr & 0xffffff
	wc.DLIDPathBits = *(*uint8)(unsafe.Add(cqe, offMLPath)) & 0x7f
	if (fr>>28)&3 != 0 {
		wc.Flags |= uverbs.WCWithGRH
	}
	wc.PkeyIndex = uint16(get32(cqe, offImmInval))
	return uverbs.WCSuccess
}

// copyToScat mirrors rdma-core cq.c: copy_to_scat: spread the payload
// held in the CQE over the receive WQE's data segments.
//
// The destination is found through local (the registered memory of the
// QP's PD): a data segment naming memory that is not registered under its
// lkey completes with a local protection error instead of a wild write.
func copyToScat(local localFn, scat, buf unsafe.Pointer, size uint32, maxSeg int) uverbs.WCStatus {
	for i := 0; i < maxSeg && size > 0; i++ {
		n := min(size, get32(scat, 0))
		dst := local.bytes(get32(scat, 4), be64(*(*uint64)(unsafe.Add(scat, 8))), int(n))
		if dst == nil && n > 0 {
			return uverbs.WCLocProtErr
		}
		copy(dst, unsafe.Slice((*byte)(buf), n))
		size -= n
		buf = unsafe.Add(buf, n)
		scat = unsafe.Add(scat, dataSegSize)
	}
	if size != 0 {
		return uverbs.WCLocLenErr
	}
	return uverbs.WCSuccess
}

// copyToSendWQE mirrors rdma-core cq.c: mlx5_copy_to_send_wqe: the data of
// an RDMA read or atomic response delivered in the CQE goes to the WQE's
// local data segments.
func (s *sendQueue) copyToSendWQE(ctr uint32, buf unsafe.Pointer, size uint32) uverbs.WCStatus {
	ctrl := s.wqe(ctr)
	if s.qpType != uverbs.QPTypeRC {
		return uverbs.WCGeneralErr
	}
	var skip uintptr
	switch get32(ctrl, 0) & 0xff {
	case opRDMARead:
		skip = ctrlSegSize + raddrSegSize
	case opAtomicCS, opAtomicFA:
		skip = ctrlSegSize + raddrSegSize + atomicSegSize
	default:
		return uverbs.WCGeneralErr
	}
	scat := unsafe.Add(ctrl, skip)
	max := int(get32(ctrl, 4)&0x3f) - int(skip/16)
	if end := uintptr(scat) + uintptr(max)*dataSegSize; end > uintptr(s.end) {
		first := int((uintptr(s.end) - uintptr(scat)) / dataSegSize)
		if copyToScat(s.local, scat, buf, size, first) == uverbs.WCSuccess {
			return uverbs.WCSuccess
		}
		// Consumed the first part; continue at the ring start.
		var used uint32
		for i := 0; i < first; i++ {
			used += get32(unsafe.Add(scat, i*dataSegSize), 0)
		}
		return copyToScat(s.local, s.buf, unsafe.Add(buf, used), size-used, max-first)
	}
	return copyToScat(s.local, scat, buf, size, max)
}

// errStatus mirrors rdma-core cq.c: mlx5_handle_error_cqe.
func errStatus(syndrome uint8) uverbs.WCStatus {
	switch syndrome {
	case 0x01:
		return uverbs.WCLocLenErr
	case 0x02:
		return uverbs.WCLocQPOpErr
	case 0x04:
		return uverbs.WCLocProtErr
	case 0x05:
		return uverbs.WCWRFlushErr
	case 0x06:
		return uverbs.WCMWBindErr
	case 0x10:
		return uverbs.WCBadRespErr
	case 0x11:
		return uverbs.WCLocAccessErr
	case 0x12:
		return uverbs.WCRemInvReqErr
	case 0x13:
		return uverbs.WCRemAccessErr
	case 0x14:
		return uverbs.WCRemOpErr
	case 0x15:
		return uverbs.WCRetryExcErr
	case 0x16:
		return uverbs.WCRNRRetryExcErr
	case 0x22:
		return uverbs.WCRemAbortErr
	}
	return uverbs.WCGeneralErr
}

// swOwned reports whether the CQE at index i is software's: written by
// the device in this pass (rdma-core cq.c: get_sw_cqe).
func (c *cqRing) swOwned(i uint32) bool {
	opOwn := *(*uint8)(unsafe.Add(c.cqe(i), offOpOwn))
	return opOwn>>4 != cqeInvalid && opOwn&cqeOwnerMask == uint8(i&c.ncqe/c.ncqe)
}

// clean mirrors rdma-core cq.c: __mlx5_cq_clean for cqe_version 1: drop
// every unpolled CQE of user index uidx (returning the SRQ WQEs its
// receive completions hold) and move the older CQEs up over them, so that
// no later poll looks the QP up. The QP is in RESET in the kernel, so no
// new CQE of it can arrive. Callers hold the CQ's lock.
func (c *cqRing) clean(uidx uint32, srq *srqQueue) {
	if c.buf == nil { // the CQ went first (context close)
		return
	}
	prod := c.consIndex
	for c.swOwned(prod) && prod != c.consIndex+c.ncqe-1 {
		prod++
	}
	var nfreed uint32
	for prod != c.consIndex {
		prod--
		cqe := c.cqe(prod)
		if get32(cqe, offSrqnUidx)&0xffffff == uidx {
			if op := *(*uint8)(unsafe.Add(cqe, offOpOwn)) >> 4; srq != nil && isResponder(op) {
				srq.free(uint32(get16(cqe, offWQECtr)))
			}
			nfreed++
		} else if nfreed > 0 {
			dest := c.cqe(prod + nfreed)
			owner := *(*uint8)(unsafe.Add(dest, offOpOwn)) & cqeOwnerMask
			*(*[cqeSize64]byte)(dest) = *(*[cqeSize64]byte)(cqe)
			op := (*uint8)(unsafe.Add(dest, offOpOwn))
			*op = *op&^cqeOwnerMask | owner
		}
	}
	if nfreed > 0 {
		c.consIndex += nfreed
		mmio.ToDevice() // the moved CQEs before the consumer index
		c.dbrec[cqSetCI] = be32(c.consIndex & 0xffffff)
	}
}

// resizeCopy mirrors rdma-core cq.c: mlx5_cq_resize_copy_cqes: the CQEs
// from the consumer index up to the HCA's RESIZE_CQ CQE move to the new
// ring (of n entries) one slot further on, with the new ring's ownership
// bits; the consumer index then steps over the resize CQE's slot. Callers
// hold the CQ's lock.
func (c *cqRing) resizeCopy(nbuf unsafe.Pointer, n uint32) error {
	dst := cqRing{buf: nbuf, ncqe: n}
	i := c.consIndex
	for {
		if !c.swOwned(i) {
			return &uverbs.Error{Op: "resize cq", Err: fmt.Errorf("%w: CQE %d of the old ring is not software's before the resize CQE", sys.NewErrno(syscall.EIO), i)}
		}
		scqe := c.cqe(i)
		if *(*uint8)(unsafe.Add(scqe, offOpOwn))>>4 == cqeResizeCQ {
			break
		}
		if i-c.consIndex >= c.ncqe {
			return &uverbs.Error{Op: "resize cq", Err: fmt.Errorf("%w: no resize CQE in the old ring", sys.NewErrno(syscall.EIO))}
		}
		d := dst.cqe(i + 1)
		*(*[cqeSize64]byte)(d) = *(*[cqeSize64]byte)(scqe)
		op := (*uint8)(unsafe.Add(d, offOpOwn))
		*op = *op&^cqeOwnerMask | uint8((i+1)&n/n)
		i++
	}
	c.consIndex++
	return nil
}

// isResponder mirrors rdma-core cq.c: is_responder.
func isResponder(op uint8) bool {
	switch op {
	case cqeRespWrImm, cqeRespSend, cqeRespSendImm, cqeRespSendInv, cqeRespErr:
		return true
	}
	return false
}

// arm mirrors rdma-core cq.c: mlx5_arm_cq.
func (c *cqRing) arm(solicited bool) {
	sn := c.armSN & 3
	ci := c.consIndex & 0xffffff
	cmd := uint32(0)
	if solicited {
		cmd = cqDBReqNotSol
	}
	w0 := sn<<28 | cmd | ci
	c.dbrec[cqArmDB] = be32(w0)
	mmio.WCStart()
	mmio.Store64(unsafe.Add(c.uar, cqDBOff), be64(uint64(w0)<<32|uint64(c.cqn)))
	mmio.FlushWrites()
}

// event is rdma-core cq.c: mlx5_cq_event: a completion event was read.
func (c *cqRing) event() { c.armSN++ }
