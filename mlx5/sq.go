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

// ErrQueueFull is the error (wrapping ENOMEM, as libmlx5 returns) of a post
// to a send or receive queue that holds as many work requests as it can.
var ErrQueueFull = errors.New("work queue full")

var (
	errSQFull = &uverbs.Error{Op: "post send", Err: fmt.Errorf("%w: %w", sys.NewErrno(syscall.ENOMEM), ErrQueueFull)}
	errRQFull = &uverbs.Error{Op: "post recv", Err: fmt.Errorf("%w: %w", sys.NewErrno(syscall.ENOMEM), ErrQueueFull)}
)

func postErr(op string, e syscall.Errno, format string, args ...any) error {
	return &uverbs.Error{Op: op, Err: fmt.Errorf("%w: "+format, append([]any{sys.NewErrno(e)}, args...)...)}
}

// bfReg is a BlueFlame register: rdma-core struct mlx5_bf. reg points at
// the register in a mapped UAR page; the two halves of bufSize bytes are
// used alternately. bufSize 0 means doorbell only (bfreg 0).
type bfReg struct {
	reg     unsafe.Pointer
	offset  uintptr
	bufSize uintptr
	uuarn   uint32
	pageID  uint32         // dynamic UARs: the page create_cq/create_qp name
	uarBase unsafe.Pointer // dynamic UARs: the 4 KiB UAR (CQ doorbell at +0x20)
}

// wq is a work queue's bookkeeping: rdma-core struct mlx5_wq.
type wq struct {
	wrid    []uint64
	wqeHead []uint32 // SQ: head+nreq when the WQE at this index was posted
	wqeCnt  uint32
	maxPost uint32
	maxGS   int
	head    uint32        // work requests posted
	tail    atomic.Uint32 // work requests retired by polling (written by the CQ poll, read by post)
	curPost uint32        // SQ: WQEBBs posted
	shift   uint
	buf     unsafe.Pointer
	// local returns the registered memory [addr, addr+n) under lkey, or nil
	// (uverbs.PD.SGEBytes of the QP's PD): inline sends copy from it and
	// scatter-to-CQE copies into it, so an address that is not registered
	// memory is an error instead of a fault.
	local localFn
}

// localFn finds registered memory by lkey and virtual address.
type localFn func(lkey uint32, addr uint64, n int) []byte

// pdLocal is the localFn of a PD.
func pdLocal(pd *uverbs.PD) localFn {
	return func(lkey uint32, addr uint64, n int) []byte {
		b, _ := pd.SGEBytes(uverbs.SGE{Addr: addr, Length: uint32(n), LKey: lkey})
		return b
	}
}

// overflow mirrors rdma-core qp.c: mlx5_wq_overflow. The CQ poll advances
// tail under the CQ's lock and post reads it under the queue's: an atomic
// instead of libmlx5's retry under the CQ lock. A stale tail only reports
// full early.
func (w *wq) overflow(nreq uint32) bool {
	return w.head-w.tail.Load()+nreq >= w.maxPost
}

// sendQueue is a QP's send side.
type sendQueue struct {
	wq
	end       unsafe.Pointer // qend: one past the last WQEBB
	qpn       uint32
	qpType    uverbs.QPType
	sigBits   uint8 // MLX5_WQE_CTRL_CQ_UPDATE when every WR completes
	maxInline int
	dbrec     *[2]uint32
	bf        *bfReg
	preferBF  bool
	ahAV      func(*uverbs.AH) (*av, bool)
}

func (s *sendQueue) wqe(idx uint32) unsafe.Pointer {
	return unsafe.Add(s.buf, uintptr(idx&(s.wqeCnt-1))<<sendWQEBBSh)
}

var mlx5Opcode = [16]uint8{
	uverbs.WRRDMAWrite:         opRDMAWrite,
	uverbs.WRRDMAWriteWithImm:  opRDMAWriteImm,
	uverbs.WRSend:              opSend,
	uverbs.WRSendWithImm:       opSendImm,
	uverbs.WRRDMARead:          opRDMARead,
	uverbs.WRAtomicCmpAndSwp:   opAtomicCS,
	uverbs.WRAtomicFetchAndAdd: opAtomicFA,
	uverbs.WRSendWithInv:       opSendInval,
}

// post mirrors rdma-core providers/mlx5/qp.c: _mlx5_post_send for RC, UC
// and UD, and post_send_db. It returns how many work requests it posted;
// on error wr[n] is the one that failed and the ones before it were rung.
//
// Per WQE: one opcode-table lookup picks the segments, the control
// segment is two 8-byte stores, inline data is copied without a call
// (copySmall), and errors are built only after the loop (postErr), so that
// the loop holds few values across its one call (the inline-data lookup).
func (s *sendQueue) post(wrs []uverbs.SendWR) (int, error) {
	var (
		nreq int
		fail uint8 // why wrs[nreq] failed; the error is built after the loop
		ctrl unsafe.Pointer
		size uint32
		inl  bool
	)
	if s.buf == nil { // destroyed (qp.Destroy, under the same lock)
		return 0, uverbs.ErrClosed
	}
	if len(s.wrid) == 0 { // no SQ (max_send_wr 0): every post is "full"
		if len(wrs) == 0 {
			return 0, nil
		}
		return 0, errSQFull
	}
	// Only the counters are locals: around the per-WQE call (the inline
	// data lookup) every local is spilled, so others would only add spills.
	curPost, head := s.curPost, s.head
	// mlx5_wq_overflow: the tail is read again only when the queue looks full.
	room := int(s.maxPost) - int(head-s.tail.Load())
	for nreq = 0; nreq < len(wrs); nreq++ {
		wr := &wrs[nreq]
		var kind uint8
		if uint(wr.Opcode) < 16 {
			kind = opKinds[s.qpType&7][wr.Opcode&15] // NewQP takes RC, UC and UD only
		}
		if kind == 0 {
			fail = failOpcode
			break
		}
		op := mlx5Opcode[wr.Opcode&15]
		sgl, flags := wr.SGL, wr.Flags
		if nreq >= room {
			if room = int(s.maxPost) - int(head-s.tail.Load()); nreq >= room {
				fail = failFull
				break
			}
		}
		if len(sgl) > s.maxGS {
			fail = failSGE
			break
		}
		idx := curPost & (s.wqeCnt - 1)
		ctrl = unsafe.Add(s.buf, uintptr(idx)<<sendWQEBBSh)
		seg := unsafe.Add(ctrl, ctrlSegSize)
		var imm uint32
		if opHasImm[op] {
			imm = be32(wr.Imm) // send_ieth: imm_data is kept in network order
		}
		fm := s.sigBits
		if flags&uverbs.SendFence != 0 {
			fm |= ctrlFence
		}
		if flags&uverbs.SendSignaled != 0 {
			fm |= ctrlCQUpdate
		}
		if flags&uverbs.SendSolicited != 0 {
			fm |= ctrlSolicited
		}
		// ctrl[8:16): signature 0, reserved, fm_ce_se, imm.
		*(*uint64)(unsafe.Add(ctrl, 8)) = uint64(fm)<<24 | uint64(imm)<<32
		size = ctrlSegSize / 16
		atomic := false
		switch kind {
		case kindRaddr:
			setRaddrSeg(seg, wr.RemoteAddr, wr.RKey)
			seg = unsafe.Add(seg, raddrSegSize)
			size += raddrSegSize / 16
		case kindAtomic:
			setRaddrSeg(seg, wr.RemoteAddr, wr.RKey)
			seg = unsafe.Add(seg, raddrSegSize)
			// set_atomic_seg: swap_add is the addend for fetch-and-add.
			if wr.Opcode == uverbs.WRAtomicCmpAndSwp {
				put64(seg, 0, wr.Swap)
				put64(seg, 8, wr.CompareAdd)
			} else {
				put64(seg, 0, wr.CompareAdd)
				put64(seg, 8, 0)
			}
			seg = unsafe.Add(seg, atomicSegSize)
			size += (raddrSegSize + atomicSegSize) / 16
			atomic = true
		case kindUD:
			a, ok := s.ahAV(wr.AH)
			if !ok {
				fail = failAH
				break
			}
			// set_datagram_seg
			*(*av)(seg) = *a
			put32(seg, 8, wr.RemoteQPN|extendedUDAV)
			put32(seg, 0, wr.RemoteQKey)
			seg = unsafe.Add(seg, datagramSegSize)
			size += datagramSegSize / 16
			if seg == s.end {
				seg = s.buf
			}
		}
		if fail != 0 {
			break
		}
		if wr.InlineData != nil || flags&uverbs.SendInline != 0 && len(sgl) > 0 {
			var sz uint32
			var e syscall.Errno
			if wr.InlineData == nil && len(sgl) == 1 && sgl[0].Length != 0 && int(sgl[0].Length) <= s.maxInline &&
				uintptr(seg)+4+uintptr(sgl[0].Length) <= uintptr(s.end) {
				// The common case: one SGE that fits before the ring's end.
				sg := &sgl[0]
				n := int(sg.Length)
				if src := s.local(sg.LKey, sg.Addr, n); src != nil {
					copySmall(unsafe.Add(seg, 4), unsafe.Pointer(unsafe.SliceData(src)), n)
					put32(seg, 0, uint32(n)|inlineSegFlag)
					sz = uint32(n+4+15) / 16
				} else {
					e = syscall.EINVAL
				}
			} else {
				sz, e = s.setInline(wr, seg)
			}
			if e == syscall.ENOMEM {
				fail = failInlineLen
				break
			} else if e != 0 {
				fail = failInlineMem
				break
			}
			inl = true
			size += sz
		} else {
			d := seg
			for i := range sgl {
				sg := &sgl[i]
				if d == s.end {
					d = s.buf
				}
				if sg.Length == 0 {
					continue
				}
				if atomic {
					setDataSeg(d, atomicSize, sg.LKey, sg.Addr)
				} else {
					setDataSeg(d, sg.Length, sg.LKey, sg.Addr)
				}
				d = unsafe.Add(d, dataSegSize)
				size += dataSegSize / 16
			}
		}
		// ctrl[0:8): opmod_idx_opcode, qpn_ds (big-endian).
		*(*uint64)(ctrl) = be64(uint64((curPost&0xffff)<<8|uint32(op))<<32 | uint64(size|s.qpn<<8))
		s.wrid[idx] = wr.WRID
		s.wqeHead[idx] = head + uint32(nreq)
		curPost += (size*16 + sendWQEBB - 1) / sendWQEBB
	}
	s.curPost = curPost
	racePosted(unsafe.Pointer(s))
	s.ring(uint32(nreq), inl, size, ctrl)
	if fail != 0 {
		return nreq, s.postErr(fail, &wrs[nreq])
	}
	return nreq, nil
}

// Why a work request failed (post keeps error values out of its loop).
const (
	failOpcode    = 1 + iota // an opcode the QP type does not take
	failFull                 // the SQ holds max_post
	failSGE                  // more SGEs than max_send_sge
	failAH                   // a UD send without an mlx5 AH
	failInlineLen            // inline data beyond max_inline_data
	failInlineMem            // inline data outside registered memory
)

// postErr is the error of a failed post, as libmlx5 reports it (EINVAL,
// ENOMEM), saying which limit or rule.
//
//go:noinline
func (s *sendQueue) postErr(fail uint8, wr *uverbs.SendWR) error {
	switch fail {
	case failOpcode:
		if uint(wr.Opcode) >= uint(len(mlx5Opcode)) || mlx5Opcode[wr.Opcode] == 0 {
			return postErr("post send", syscall.EINVAL, "opcode %s is not supported", wr.Opcode)
		}
		return postErr("post send", syscall.EINVAL, "%s on a %s QP", wr.Opcode, s.qpType)
	case failFull:
		return errSQFull
	case failSGE:
		return postErr("post send", syscall.ENOMEM, "%d SGEs, the QP takes %d", len(wr.SGL), s.maxGS)
	case failAH:
		return postErr("post send", syscall.EINVAL, "a UD send needs an mlx5 AH")
	case failInlineLen:
		return postErr("post send", syscall.ENOMEM, "inline data exceeds the QP's max_inline_data %d", s.maxInline)
	}
	return postErr("post send", syscall.EINVAL, "inline data is not inside memory registered in the QP's PD under its lkey")
}

// Segments a work request needs after the control segment, by QP type and
// opcode (rdma-core qp.c: _mlx5_post_send's switch on ibqp->qp_type);
// 0 is an opcode the QP type does not take.
const (
	kindPlain  = 1 + iota // send: data or inline only
	kindRaddr             // RDMA read/write: remote address segment
	kindAtomic            // remote address and atomic segments
	kindUD                // datagram segment (the AH's address vector)
)

var opKinds = func() (k [8][16]uint8) {
	rc, uc, ud := &k[uverbs.QPTypeRC], &k[uverbs.QPTypeUC], &k[uverbs.QPTypeUD]
	for _, op := range []uverbs.WROpcode{uverbs.WRSend, uverbs.WRSendWithImm, uverbs.WRSendWithInv} {
		rc[op] = kindPlain
	}
	for _, op := range []uverbs.WROpcode{uverbs.WRRDMAWrite, uverbs.WRRDMAWriteWithImm, uverbs.WRRDMARead} {
		rc[op] = kindRaddr
	}
	rc[uverbs.WRAtomicCmpAndSwp], rc[uverbs.WRAtomicFetchAndAdd] = kindAtomic, kindAtomic
	uc[uverbs.WRSend], uc[uverbs.WRSendWithImm] = kindPlain, kindPlain
	uc[uverbs.WRRDMAWrite], uc[uverbs.WRRDMAWriteWithImm] = kindRaddr, kindRaddr
	ud[uverbs.WRSend], ud[uverbs.WRSendWithImm] = kindUD, kindUD
	return k
}()

// opHasImm marks the mlx5 opcodes whose control segment carries imm_data
// (or the invalidated rkey).
var opHasImm = [256]bool{opSendImm: true, opRDMAWriteImm: true, opSendInval: true}

func setRaddrSeg(p unsafe.Pointer, addr uint64, rkey uint32) {
	put64(p, 0, addr)
	put32(p, 8, rkey)
	*(*uint32)(unsafe.Add(p, 12)) = 0
}

// setInline mirrors rdma-core qp.c: set_data_inl_seg (data wraps at the end
// of the ring).
func (s *sendQueue) setInline(wr *uverbs.SendWR, seg unsafe.Pointer) (uint32, syscall.Errno) {
	p := unsafe.Add(seg, 4)
	if wr.InlineData != nil {
		// The bytes themselves (uverbs.SendWR.InlineData: the extended
		// API's ibv_wr_set_inline_data), not an SGE in registered memory.
		src := wr.InlineData
		n := len(src)
		if n > s.maxInline {
			return 0, syscall.ENOMEM
		}
		if n == 0 {
			return 0, 0
		}
		if room := int(uintptr(s.end) - uintptr(p)); n > room {
			copy(unsafe.Slice((*byte)(p), room), src[:room])
			src = src[room:]
			p = s.buf
		}
		copy(unsafe.Slice((*byte)(p), len(src)), src)
		put32(seg, 0, uint32(n)|inlineSegFlag)
		return uint32(n+4+15) / 16, 0
	}
	if len(wr.SGL) == 1 {
		// The common case: one SGE that fits before the ring's end.
		n := int(wr.SGL[0].Length)
		if n > s.maxInline {
			return 0, syscall.ENOMEM
		}
		if n == 0 {
			return 0, 0
		}
		if uintptr(p)+uintptr(n) <= uintptr(s.end) {
			src := s.local(wr.SGL[0].LKey, wr.SGL[0].Addr, n)
			if src == nil {
				return 0, syscall.EINVAL
			}
			copy(unsafe.Slice((*byte)(p), n), src)
			put32(seg, 0, uint32(n)|inlineSegFlag)
			return uint32(n+4+15) / 16, 0
		}
	}
	total := 0
	for i := range wr.SGL {
		n := int(wr.SGL[i].Length)
		total += n
		if total > s.maxInline {
			return 0, syscall.ENOMEM
		}
		if n == 0 {
			continue
		}
		src := s.local(wr.SGL[i].LKey, wr.SGL[i].Addr, n)
		if src == nil {
			return 0, syscall.EINVAL
		}
		if room := int(uintptr(s.end) - uintptr(p)); n > room {
			copy(unsafe.Slice((*byte)(p), room), src[:room])
			src = src[room:]
			n -= room
			p = s.buf
		}
		copy(unsafe.Slice((*byte)(p), n), src)
		p = unsafe.Add(p, n)
	}
	if total == 0 {
		return 0, 0
	}
	put32(seg, 0, uint32(total)|inlineSegFlag)
	return uint32(total+4+15) / 16, 0
}

// ring mirrors rdma-core qp.c: post_send_db.
func (s *sendQueue) ring(nreq uint32, inl bool, size uint32, ctrl unsafe.Pointer) {
	if nreq == 0 {
		return
	}
	s.head += nreq
	mmio.ToDevice()
	s.dbrec[sndDBR] = be32(s.curPost & 0xffff)
	mmio.WCStart()
	bf := s.bf
	dst := unsafe.Add(bf.reg, bf.offset)
	if nreq == 1 && bf.uuarn != 0 && (inl || s.preferBF) && size > 1 && uintptr(size) <= bf.bufSize/16 {
		// mlx5_bf_copy: 64-byte chunks, the source wrapping at the ring end.
		n := (size*16 + 63) / 64
		src := ctrl
		for ; n > 0; n-- {
			mmio.Copy64(dst, src)
			dst = unsafe.Add(dst, 64)
			src = unsafe.Add(src, 64)
			if src == s.end {
				src = s.buf
			}
		}
	} else {
		mmio.Store64(dst, *(*uint64)(ctrl))
	}
	mmio.FlushWrites()
	bf.offset ^= bf.bufSize
}

// recvQueue is a QP's own receive queue.
type recvQueue struct {
	wq
	dbrec *[2]uint32
}

func (r *recvQueue) wqe(idx uint32) unsafe.Pointer {
	return unsafe.Add(r.buf, uintptr(idx&(r.wqeCnt-1))<<r.shift)
}

// post mirrors rdma-core providers/mlx5/qp.c: mlx5_post_recv.
func (r *recvQueue) post(wrs []uverbs.RecvWR) (int, error) {
	if r.buf == nil { // destroyed (qp.Destroy, under the same lock)
		return 0, uverbs.ErrClosed
	}
	var nreq int
	var err error
	ind := r.head & (r.wqeCnt - 1)
	for nreq = 0; nreq < len(wrs); nreq++ {
		wr := &wrs[nreq]
		if r.overflow(uint32(nreq)) {
			err = errRQFull
			break
		}
		if len(wr.SGL) > r.maxGS {
			err = postErr("post recv", syscall.EINVAL, "%d SGEs, the queue takes %d", len(wr.SGL), r.maxGS)
			break
		}
		scat := r.wqe(ind)
		j := 0
		for i := range wr.SGL {
			sg := &wr.SGL[i]
			if sg.Length == 0 {
				continue
			}
			setDataSeg(unsafe.Add(scat, j*dataSegSize), sg.Length, sg.LKey, sg.Addr)
			j++
		}
		if j < r.maxGS {
			setDataSeg(unsafe.Add(scat, j*dataSegSize), 0, invalidLKey, 0)
		}
		r.wrid[ind] = wr.WRID
		ind = (ind + 1) & (r.wqeCnt - 1)
	}
	if nreq > 0 {
		racePosted(unsafe.Pointer(r))
		r.head += uint32(nreq)
		mmio.ToDevice()
		r.dbrec[rcvDBR] = be32(r.head & 0xffff)
	}
	return nreq, err
}

// copySmall copies n bytes from src to dst without a call for the sizes
// inline data has (runtime.memmove costs a call and a size dispatch per
// WQE): 16-byte words, the last one overlapping the one before, so that
// nothing outside [0, n) is read or written. Larger copies use memmove.
func copySmall(dst, src unsafe.Pointer, n int) {
	type w16 = [16]byte
	switch {
	case n >= 16 && n <= 128:
		for i := 0; i < n-16; i += 16 {
			*(*w16)(unsafe.Add(dst, i)) = *(*w16)(unsafe.Add(src, i))
		}
		*(*w16)(unsafe.Add(dst, n-16)) = *(*w16)(unsafe.Add(src, n-16))
	case n >= 8 && n < 16:
		*(*uint64)(dst) = *(*uint64)(src)
		*(*uint64)(unsafe.Add(dst, n-8)) = *(*uint64)(unsafe.Add(src, n-8))
	default:
		copy(unsafe.Slice((*byte)(dst), n), unsafe.Slice((*byte)(src), n))
	}
}
