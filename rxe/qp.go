package rxe

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"unsafe"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
	"github.com/ibgo/ibgo/uverbs"
)

const (
	sendWQESize = int(unsafe.Sizeof(abi.RxeSendWQE{}))
	recvWQESize = int(unsafe.Sizeof(abi.RxeRecvWQE{}))
	sgeSize     = int(unsafe.Sizeof(abi.RxeSGE{}))
	// rdma-core passes sizeof(struct ibv_send_wr) as the doorbell's wqe_size;
	// recent kernels reject anything below sizeof(struct ib_uverbs_send_wr).
	doorbellWQESize = 128
)

// ErrQueueFull is returned (wrapped) when a post finds no free slot: the
// work request is not written, nothing is overwritten.
var ErrQueueFull = errors.New("work queue full")

// wq is a send or receive work queue.
type wq struct {
	mu        sync.Mutex
	ring      *ring
	maxSGE    int
	maxInline int
}

// qp mirrors rdma-core providers/rxe/rxe.c: rxe_create_qp, rxe_post_send,
// rxe_post_recv.
type qp struct {
	qp     *uverbs.QP
	typ    uverbs.QPType
	sq, rq wq
	ssn    uint32
	hasRQ  bool
	ops    uverbs.SendOps // QPInitAttr.SendOps: FLUSH and ATOMIC_WRITE need theirs

	// doorbell is the POST_SEND command with zero work requests that tells
	// the kernel to process the send queue (rxe.c: post_send_db); it lives in
	// mmap'd memory because the kernel writes the response through it. It
	// and dbFD are guarded by sq.mu: PostSend rings it before unlocking, so
	// Destroy (which unmaps it under sq.mu) waits for posts in flight.
	doorbell sys.Buf
	dbArena  *sys.Arena
	dbFD     *sys.FD

	// local finds the registered memory an inline SGE names
	// (uverbs.PD.SGEBytes of the QP's PD).
	local func(lkey uint32, addr uint64, n int) []byte
}

// SupportedSendOps mirrors rxe.c: check_qp_init_attr's
// RXE_SUP_{RC,UC,UD}_QP_SEND_OPS_FLAGS (LOCAL_INV on RC, BIND_MW on RC and
// UC), plus FLUSH and ATOMIC_WRITE, which checkSendOps gates on the device.
func (c *context) SupportedSendOps(t uverbs.QPType) uverbs.SendOps {
	switch t {
	case uverbs.QPTypeRC:
		return uverbs.SendOpRDMAWrite | uverbs.SendOpRDMAWriteWithImm | uverbs.SendOpSend | uverbs.SendOpSendWithImm |
			uverbs.SendOpRDMARead | uverbs.SendOpAtomicCmpAndSwp | uverbs.SendOpAtomicFetchAdd | uverbs.SendOpSendWithInv |
			uverbs.SendOpLocalInv | uverbs.SendOpBindMW | uverbs.SendOpFlush | uverbs.SendOpAtomicWrite
	case uverbs.QPTypeUC:
		return uverbs.SendOpRDMAWrite | uverbs.SendOpRDMAWriteWithImm | uverbs.SendOpSend | uverbs.SendOpSendWithImm |
			uverbs.SendOpBindMW | uverbs.SendOpSendWithInv
	case uverbs.QPTypeUD:
		return uverbs.SendOpSend | uverbs.SendOpSendWithImm
	}
	return 0
}

func (c *context) NewQP(attr *uverbs.QPInitAttr) (uverbs.QPDriver, error) {
	return &qp{typ: attr.Type, hasRQ: attr.SRQ == nil, ops: attr.SendOps}, nil
}

// The kernel wants no driver request (inlen must be 0) and room for
// struct rxe_create_qp_resp.
func (q *qp) DriverData() uverbs.DriverData {
	return uverbs.DriverData{OutLen: int(unsafe.Sizeof(abi.RxeCreateQPResp{}))}
}

func (q *qp) Created(p *uverbs.QP, out []byte) error {
	if len(out) < int(unsafe.Sizeof(abi.RxeCreateQPResp{})) {
		return errors.New("rxe: short create-qp response")
	}
	resp := (*abi.RxeCreateQPResp)(unsafe.Pointer(&out[0]))
	cp := p.Cap()
	var err error
	if q.sq.ring, err = mapRing(p.Context(), resp.SQMI, sendWQESize); err != nil {
		return err
	}
	q.sq.maxSGE, q.sq.maxInline = int(cp.MaxSendSGE), int(cp.MaxInlineData)
	if q.hasRQ {
		if q.rq.ring, err = mapRing(p.Context(), resp.RQMI, recvWQESize); err != nil {
			q.sq.ring.unmap()
			return err
		}
		q.rq.maxSGE = int(cp.MaxRecvSGE)
	}
	db, err := sys.NewArena(sys.Pagesize)
	if err != nil {
		q.sq.ring.unmap()
		q.rq.ring.unmap()
		return err
	}
	q.dbArena = db
	q.doorbell, _ = db.AllocBuf(int(unsafe.Sizeof(abi.CmdHdr{})) + int(unsafe.Sizeof(abi.PostSend{})))
	cmd := q.doorbell.Bytes()
	h := (*abi.CmdHdr)(unsafe.Pointer(&cmd[0]))
	h.Command = abi.IB_USER_VERBS_CMD_POST_SEND
	h.InWords = uint16(len(cmd) / 4)
	h.OutWords = uint16(unsafe.Sizeof(abi.PostSendResp{}) / 4)
	ps := (*abi.PostSend)(unsafe.Pointer(&cmd[unsafe.Sizeof(abi.CmdHdr{})]))
	ps.Response = sys.Addr(db.Alloc(int(unsafe.Sizeof(abi.PostSendResp{}))))
	ps.QPHandle = p.Handle()
	ps.WQESize = doorbellWQESize
	q.dbFD = p.Context().CmdFD()
	q.qp = p
	pd := p.PD()
	q.local = func(lkey uint32, addr uint64, n int) []byte {
		b, _ := pd.SGEBytes(uverbs.SGE{Addr: addr, Length: uint32(n), LKey: lkey})
		return b
	}
	return nil
}

// PostSend writes each work request into the send queue in the kernel's
// layout and rings the doorbell once. It allocates nothing.
//
// The doorbell is rung with sq.mu still held (rdma-core rings it after
// unlocking): the doorbell page and fd then cannot be unmapped or released
// by a concurrent Destroy while the write(2) uses them. Posts to one QP
// from several goroutines wait for each other's doorbell, which the kernel
// serialises on the QP anyway.
func (q *qp) PostSend(wrs []uverbs.SendWR) (int, error) {
	q.sq.mu.Lock()
	r := q.sq.ring
	if r == nil {
		q.sq.mu.Unlock()
		return 0, uverbs.ErrClosed
	}
	n := 0
	var err error
	for n < len(wrs) {
		if err = q.postOneSend(r, &wrs[n]); err != nil {
			break
		}
		n++
	}
	if n > 0 {
		if dberr := ringDoorbell(q.dbFD, q.doorbell); dberr != nil && err == nil {
			err = q.doorbellErr(dberr)
		}
	}
	q.sq.mu.Unlock()
	return n, err
}

func (q *qp) doorbellErr(dberr error) error {
	e := &uverbs.Error{Op: "post send doorbell", Err: dberr}
	if q.qp != nil {
		e.Device = q.qp.Context().Device().Name
	}
	if sys.ErrnoOf(dberr) == sys.EINVAL {
		e.Hint = "the QP must be in RTS"
	}
	return e
}

func sendErr(what string, args ...any) error {
	return &uverbs.Error{Op: "post send", Err: fmt.Errorf("%w: "+what, append([]any{sys.NewErrno(sys.EINVAL)}, args...)...)}
}

// postOneSend mirrors rxe.c: validate_send_wr, convert_send_wr, init_send_wqe,
// and for FLUSH and ATOMIC_WRITE (which rdma-core posts only through the
// extended API) wr_flush and wr_atomic_write.
func (q *qp) postOneSend(r *ring, wr *uverbs.SendWR) error {
	sgl := wr.SGL
	length := 0
	if wr.InlineData != nil {
		sgl, length = nil, len(wr.InlineData) // the payload is the bytes themselves
	} else {
		for i := range sgl {
			length += int(sgl[i].Length)
		}
	}
	if len(sgl) > q.sq.maxSGE {
		return sendErr("%d SGEs, the QP takes %d", len(sgl), q.sq.maxSGE)
	}
	inline := wr.Flags&uverbs.SendInline != 0 || wr.InlineData != nil
	switch wr.Opcode {
	case uverbs.WRSend, uverbs.WRSendWithImm:
	case uverbs.WRRDMAWrite, uverbs.WRRDMAWriteWithImm:
		if q.typ == uverbs.QPTypeUD {
			return sendErr("%s on a UD QP", wr.Opcode)
		}
	case uverbs.WRRDMARead, uverbs.WRAtomicCmpAndSwp, uverbs.WRAtomicFetchAndAdd:
		if q.typ != uverbs.QPTypeRC {
			return sendErr("%s needs an RC QP", wr.Opcode)
		}
		if wr.Opcode != uverbs.WRRDMARead && (length < 8 || wr.RemoteAddr&7 != 0) {
			return sendErr("atomics need an 8-byte local buffer and an 8-byte aligned remote address")
		}
	case uverbs.WRBindMW:
		// rxe.c: validate_send_wr: no data, no SGEs, RC or UC only.
		if q.typ != uverbs.QPTypeRC && q.typ != uverbs.QPTypeUC {
			return sendErr("%s needs an RC or UC QP", wr.Opcode)
		}
		if len(wr.SGL) != 0 || wr.Imm != 0 {
			return sendErr("%s takes no SGEs and no immediate data", wr.Opcode)
		}
		if wr.Bind.MW == nil {
			return sendErr("%s without a memory window", wr.Opcode)
		}
		if wr.Bind.Info.Length != 0 && wr.Bind.Info.MR == nil {
			return sendErr("%s of %d bytes without an MR", wr.Opcode, wr.Bind.Info.Length)
		}
	case uverbs.WRLocalInv:
		if q.typ != uverbs.QPTypeRC && q.typ != uverbs.QPTypeUC {
			return sendErr("%s needs an RC or UC QP", wr.Opcode)
		}
		if len(wr.SGL) != 0 {
			return sendErr("%s takes no SGEs", wr.Opcode)
		}
	case uverbs.WRSendWithInv:
		// Only RC has SEND_*_INV packets (kernel rxe_opcode.c).
		if q.typ != uverbs.QPTypeRC {
			return sendErr("%s needs an RC QP", wr.Opcode)
		}
	case uverbs.WRFlush, uverbs.WRAtomicWrite:
		return q.postFlushOrAtomicWrite(r, wr)
	default:
		return sendErr("opcode %s is not supported", wr.Opcode)
	}
	if inline {
		if length > q.sq.maxInline {
			return sendErr("%d bytes inline, the QP takes %d", length, q.sq.maxInline)
		}
		if sendWQESize+length > r.elemSize {
			return sendErr("%d bytes inline do not fit a %d-byte WQE", length, r.elemSize)
		}
	} else if sendWQESize+len(sgl)*sgeSize > r.elemSize {
		return sendErr("%d SGEs do not fit a %d-byte WQE", len(sgl), r.elemSize)
	}
	var ahNum uint32
	if q.typ == uverbs.QPTypeUD {
		if wr.AH == nil {
			return sendErr("a UD send needs an AH")
		}
		a, ok := wr.AH.Driver().(*ah)
		if !ok || a.num == 0 {
			return sendErr("the AH has no rxe AH number (kernels before 5.11 are not supported)")
		}
		ahNum = a.num
	}
	if r.full() {
		return &uverbs.Error{Op: "post send", Err: fmt.Errorf("%w: %w (%d outstanding)", sys.NewErrno(sys.ENOMEM), ErrQueueFull, r.slots())}
	}
	w := (*abi.RxeSendWQE)(r.producerSlot())
	*w = abi.RxeSendWQE{}
	w.WR.WRID = wr.WRID
	w.WR.Opcode = uint32(wr.Opcode)
	w.WR.SendFlags = uint32(wr.Flags)
	switch wr.Opcode {
	case uverbs.WRSendWithImm, uverbs.WRRDMAWriteWithImm:
		w.WR.Ex = bits.ReverseBytes32(wr.Imm) // imm_data travels big-endian
	case uverbs.WRSendWithInv, uverbs.WRLocalInv:
		w.WR.Ex = wr.Imm // invalidate_rkey, host order
	}
	switch wr.Opcode {
	case uverbs.WRBindMW:
		// rxe.c: convert_send_wr: mw_rkey names the window by its current
		// key, rkey is the key it takes.
		v := (*abi.RxeSendWRMW)(unsafe.Pointer(&w.WR))
		b := &wr.Bind
		v.Addr, v.Length, v.MWRKey, v.RKey, v.Access = b.Info.Addr, b.Info.Length, b.MW.RKey(), b.RKey, uint32(b.Info.Access)
		if b.Info.MR != nil {
			v.MRLKey = b.Info.MR.LKey()
		}
	case uverbs.WRRDMAWrite, uverbs.WRRDMAWriteWithImm, uverbs.WRRDMARead:
		v := (*abi.RxeSendWRRDMA)(unsafe.Pointer(&w.WR))
		v.RemoteAddr, v.RKey = wr.RemoteAddr, wr.RKey
		w.IOVA = wr.RemoteAddr
	case uverbs.WRAtomicCmpAndSwp, uverbs.WRAtomicFetchAndAdd:
		v := (*abi.RxeSendWRAtomic)(unsafe.Pointer(&w.WR))
		v.RemoteAddr, v.CompareAdd, v.Swap, v.RKey = wr.RemoteAddr, wr.CompareAdd, wr.Swap, wr.RKey
		w.IOVA = wr.RemoteAddr
	default:
		if q.typ == uverbs.QPTypeUD {
			v := (*abi.RxeSendWRUD)(unsafe.Pointer(&w.WR))
			v.RemoteQPN, v.RemoteQKey, v.AHNum = wr.RemoteQPN, wr.RemoteQKey, ahNum
		}
	}
	payload := unsafe.Add(unsafe.Pointer(w), sendWQESize)
	switch {
	case wr.InlineData != nil:
		copy(unsafe.Slice((*byte)(payload), length), wr.InlineData)
		w.WR.SendFlags |= uint32(uverbs.SendInline)
	case inline:
		dst := unsafe.Slice((*byte)(payload), length)
		off := 0
		for i := range sgl {
			sge := &sgl[i]
			if sge.Length == 0 {
				continue
			}
			src := q.local(sge.LKey, sge.Addr, int(sge.Length))
			if src == nil {
				return sendErr("inline SGE %d (%d bytes at %#x, lkey %#x) is not inside memory registered under that lkey in the QP's PD",
					i, sge.Length, sge.Addr, sge.LKey)
			}
			off += copy(dst[off:], src)
		}
	default:
		sges := unsafe.Slice((*abi.RxeSGE)(payload), len(sgl))
		for i := range sgl {
			sges[i] = abi.RxeSGE{Addr: sgl[i].Addr, Length: sgl[i].Length, LKey: sgl[i].LKey}
		}
	}
	w.DMA.NumSGE = uint32(len(sgl)) // also for inline SGEs, as init_send_wqe
	w.DMA.Length = uint32(length)
	w.DMA.Resid = uint32(length)
	w.SSN = q.ssn
	q.ssn++
	r.advanceProducer()
	return nil
}

// postFlushOrAtomicWrite mirrors rxe.c: wr_flush and wr_atomic_write. The
// QP must have been created for them (QPInitAttr.SendOps), which is where
// uverbs checked that the kernel has them: a 6.1 kernel would fail them only
// at completion time.
func (q *qp) postFlushOrAtomicWrite(r *ring, wr *uverbs.SendWR) error {
	need := uverbs.SendOpFlush
	if wr.Opcode == uverbs.WRAtomicWrite {
		need = uverbs.SendOpAtomicWrite
	}
	if q.ops&need == 0 {
		return &uverbs.Error{Op: "post send", Err: fmt.Errorf("%w: %s needs a QP created with QPInitAttr.SendOps including %s",
			uverbs.ErrNotSupported, wr.Opcode, need)}
	}
	if q.typ != uverbs.QPTypeRC {
		return sendErr("%s needs an RC QP", wr.Opcode)
	}
	var data []byte
	if wr.Opcode == uverbs.WRAtomicWrite {
		if wr.RemoteAddr&7 != 0 {
			return sendErr("ATOMIC_WRITE needs an 8-byte aligned remote address, not %#x", wr.RemoteAddr)
		}
		switch {
		case wr.InlineData != nil:
			data = wr.InlineData
		case len(wr.SGL) == 1:
			data = q.local(wr.SGL[0].LKey, wr.SGL[0].Addr, int(wr.SGL[0].Length))
		}
		if len(data) != 8 {
			return sendErr("ATOMIC_WRITE takes exactly 8 bytes (InlineData, or one SGE in registered memory)")
		}
	}
	if r.full() {
		return &uverbs.Error{Op: "post send", Err: fmt.Errorf("%w: %w (%d outstanding)", sys.NewErrno(sys.ENOMEM), ErrQueueFull, r.slots())}
	}
	w := (*abi.RxeSendWQE)(r.producerSlot())
	*w = abi.RxeSendWQE{}
	w.WR.WRID = wr.WRID
	w.WR.Opcode = uint32(wr.Opcode)
	w.WR.SendFlags = uint32(wr.Flags)
	w.IOVA = wr.RemoteAddr
	if wr.Opcode == uverbs.WRFlush {
		v := (*abi.RxeSendWRFlush)(unsafe.Pointer(&w.WR))
		v.RemoteAddr, v.RKey, v.Type, v.Level = wr.RemoteAddr, wr.RKey, uint8(wr.FlushType), uint8(wr.FlushLevel)
		w.DMA.Length, w.DMA.Resid = wr.FlushLength, wr.FlushLength
	} else {
		v := (*abi.RxeSendWRRDMA)(unsafe.Pointer(&w.WR))
		v.RemoteAddr, v.RKey = wr.RemoteAddr, wr.RKey
		copy(unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(w), sendWQESize)), 8), data) // dma.atomic_wr
		w.DMA.Length, w.DMA.Resid = 8, 8
	}
	w.SSN = q.ssn
	q.ssn++
	r.advanceProducer()
	return nil
}

// PostRecv writes receive WQEs; the kernel consumes them as packets arrive,
// so no system call is made.
func (q *qp) PostRecv(wrs []uverbs.RecvWR) (int, error) {
	if !q.hasRQ {
		return 0, &uverbs.Error{Op: "post recv", Err: fmt.Errorf("%w: the QP receives from an SRQ; post there", sys.NewErrno(sys.EINVAL))}
	}
	if q.qp != nil && q.qp.State() == uverbs.QPStateReset {
		// rdma-core refuses too (IBTA C10-97.2.1).
		return 0, &uverbs.Error{Op: "post recv", Err: fmt.Errorf("%w: the QP is in RESET", sys.NewErrno(sys.EINVAL))}
	}
	return postRecv(&q.rq, wrs)
}

// postRecv mirrors rxe.c: rxe_post_one_recv for QPs and SRQs. It runs for
// every receive a ping-pong reposts, so it unlocks by hand (no deferred
// call) and writes each WQE once.
func postRecv(q *wq, wrs []uverbs.RecvWR) (int, error) {
	q.mu.Lock()
	r := q.ring
	if r == nil {
		q.mu.Unlock()
		return 0, uverbs.ErrClosed
	}
	for n := range wrs {
		wr := &wrs[n]
		if r.full() {
			q.mu.Unlock()
			return n, &uverbs.Error{Op: "post recv", Err: fmt.Errorf("%w: %w (%d outstanding)", sys.NewErrno(sys.ENOMEM), ErrQueueFull, r.slots())}
		}
		if len(wr.SGL) > q.maxSGE || recvWQESize+len(wr.SGL)*sgeSize > r.elemSize {
			q.mu.Unlock()
			return n, &uverbs.Error{Op: "post recv", Err: fmt.Errorf("%w: %d SGEs, the queue takes %d", sys.NewErrno(sys.EINVAL), len(wr.SGL), q.maxSGE)}
		}
		w := (*abi.RxeRecvWQE)(r.producerSlot())
		sges := unsafe.Slice((*abi.RxeSGE)(unsafe.Add(unsafe.Pointer(w), recvWQESize)), len(wr.SGL))
		length := uint32(0)
		for i := range wr.SGL {
			sges[i] = abi.RxeSGE{Addr: wr.SGL[i].Addr, Length: wr.SGL[i].Length, LKey: wr.SGL[i].LKey}
			length += wr.SGL[i].Length
		}
		*w = abi.RxeRecvWQE{WRID: wr.WRID, DMA: abi.RxeDMAInfo{Length: length, Resid: length, NumSGE: uint32(len(wr.SGL))}}
		r.advanceProducer()
	}
	q.mu.Unlock()
	return len(wrs), nil
}

func (q *qp) Destroy() error {
	q.sq.mu.Lock()
	q.sq.ring.unmap()
	q.sq.ring = nil
	if q.dbArena != nil {
		q.dbArena.Close()
		q.dbArena, q.doorbell = nil, sys.Buf{}
	}
	q.sq.mu.Unlock()
	q.rq.mu.Lock()
	q.rq.ring.unmap()
	q.rq.ring = nil
	q.rq.mu.Unlock()
	return nil
}

// ringDoorbell writes the POST_SEND doorbell (rxe.c: post_send_db).
//
// It enters the kernel as RawSyscall does, without the runtime's
// system-call bookkeeping (sys.WriteRaw). The kernel contract
// allows a sleep there (ib_uverbs_post_send copies the request with
// GFP_KERNEL, and on 6.1 rxe_post_send runs the requester inline for user
// QPs, building and looping back every packet of the queued work requests),
// so a raw call can hold its P for that long. Measured in the 6.1 VM
// (make bench-vm, 5 interleaved rounds, medians, C perftest in the same
// rotation), Syscall against RawSyscall: send_bw 4 KiB 0.63 vs 0.92 of C,
// send_bw UD 1 KiB 0.64 vs 0.96, write_bw 4 KiB -q 2 0.85 vs 0.96,
// write_lat 1.05 vs 1.01 (earlier, latency alone: about 0.3 us, 1-2.5 %).
// With Syscall the runtime hands the P away whenever the inline requester
// runs past 20 us and the poster then waits to get it back, which costs a
// third of the bandwidth; the sleep is rare (memory pressure) and bounded.
// The numbers decide for RawSyscall.
func ringDoorbell(fd *sys.FD, db sys.Buf) error { return sys.WriteRaw(fd, db) }
