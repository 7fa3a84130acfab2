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

var mlx5Opcode = [...]uint8{
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
func (s *sendQueue) post(wrs []uverbs.SendWR) (int, error) {
	var (
		nreq int
		err  error
		ctrl unsafe.Pointer
		size uint32
		inl  bool
	)
	if s.buf == nil { // destroyed (qp.Destroy, under the same lock)
		return 0, uverbs.ErrClosed
	}
	for nreq = 0; nreq < len(wrs); nreq++ {
		wr := &wrs[nreq]
		if int(wr.Opcode) >= len(mlx5Opcode) || mlx5Opcode[wr.Opcode] == 0 {
			err = postErr("post send", syscall.EINVAL, "opcode %s is not supported", wr.Opcode)
			break
		}
		op := mlx5Opcode[wr.Opcode]
		if s.overflow(uint32(nreq)) {
			err = errSQFull
			break
		}
		if len(wr.SGL) > s.maxGS {
			err = postErr("post send", syscall.ENOMEM, "%d SGEs, the QP takes %d", len(wr.SGL), s.maxGS)
			break
		}
		idx := s.curPost & (s.wqeCnt - 1)
		ctrl = s.wqe(idx)
		seg := unsafe.Add(ctrl, ctrlSegSize)
		*(*uint32)(unsafe.Add(ctrl, 8)) = 0
		var imm uint32
		switch wr.Opcode {
		case uverbs.WRSendWithImm, uverbs.WRRDMAWriteWithImm, uverbs.WRSendWithInv:
			imm = be32(wr.Imm) // send_ieth: imm_data is kept in network order
		}
		*(*uint32)(unsafe.Add(ctrl, 12)) = imm
		fence := uint8(0)
		if wr.Flags&uverbs.SendFence != 0 {
			fence = ctrlFence
		}
		fm := s.sigBits | fence
		if wr.Flags&uverbs.SendSignaled != 0 {
			fm |= ctrlCQUpdate
		}
		if wr.Flags&uverbs.SendSolicited != 0 {
			fm |= ctrlSolicited
		}
		*(*uint8)(unsafe.Add(ctrl, 11)) = fm
		size = ctrlSegSize / 16
		atomic := false
		switch s.qpType {
		case uverbs.QPTypeRC:
			switch wr.Opcode {
			case uverbs.WRRDMARead, uverbs.WRRDMAWrite, uverbs.WRRDMAWriteWithImm:
				setRaddrSeg(seg, wr.RemoteAddr, wr.RKey)
				seg = unsafe.Add(seg, raddrSegSize)
				size += raddrSegSize / 16
			case uverbs.WRAtomicCmpAndSwp, uverbs.WRAtomicFetchAndAdd:
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
			}
		case uverbs.QPTypeUC:
			switch wr.Opcode {
			case uverbs.WRRDMAWrite, uverbs.WRRDMAWriteWithImm:
				setRaddrSeg(seg, wr.RemoteAddr, wr.RKey)
				seg = unsafe.Add(seg, raddrSegSize)
				size += raddrSegSize / 16
			case uverbs.WRSend, uverbs.WRSendWithImm:
			default:
				err = postErr("post send", syscall.EINVAL, "%s on a UC QP", wr.Opcode)
			}
		case uverbs.QPTypeUD:
			switch wr.Opcode {
			case uverbs.WRSend, uverbs.WRSendWithImm:
			default:
				err = postErr("post send", syscall.EINVAL, "%s on a UD QP", wr.Opcode)
			}
			if err == nil {
				a, ok := s.ahAV(wr.AH)
				if !ok {
					err = postErr("post send", syscall.EINVAL, "a UD send needs an mlx5 AH")
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
		}
		if err != nil {
			break
		}
		if wr.InlineData != nil || wr.Flags&uverbs.SendInline != 0 && len(wr.SGL) > 0 {
			sz, e := s.setInline(wr, seg)
			if e == syscall.ENOMEM {
				err = postErr("post send", e, "inline data exceeds the QP's max_inline_data %d", s.maxInline)
				break
			} else if e != 0 {
				err = postErr("post send", e, "inline data is not inside memory registered in the QP's PD under its lkey")
				break
			}
			inl = true
			size += sz
		} else {
			d := seg
			for i := range wr.SGL {
				sg := &wr.SGL[i]
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
		put32(ctrl, 0, (s.curPost&0xffff)<<8|uint32(op))
		put32(ctrl, 4, size|s.qpn<<8)
		s.wrid[idx] = wr.WRID
		s.wqeHead[idx] = s.head + uint32(nreq)
		s.curPost += (size*16 + sendWQEBB - 1) / sendWQEBB
	}
	s.ring(uint32(nreq), inl, size, ctrl)
	return nreq, err
}

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
		r.head += uint32(nreq)
		mmio.ToDevice()
		r.dbrec[rcvDBR] = be32(r.head & 0xffff)
	}
	return nreq, err
}
