package mlx5

import (
	"errors"
	"fmt"
	"sync"
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
	// lock serialises the doorbell writes of the QPs that share a static
	// medium-class bfreg (libmlx5's bf->need_lock and bf->lock); nil for
	// a bfreg one QP has alone
	lock *sync.Mutex
}

// needBfregLock mirrors rdma-core mlx5.c: need_uuar_lock: of a static
// context's bfregs, index 0 (doorbells only, no BlueFlame) and the
// low-latency ones at the top (one QP each) take no lock; the medium ones
// between are shared by QPs and must (issue 30, item 4).
func needBfregLock(bfi, totBfregs, lowLat uint32) bool {
	if bfi == 0 {
		return false
	}
	return bfi/2+bfi%2 < totBfregs-lowLat
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
	// local finds registered memory (uverbs.PD.Registered of the QP's PD):
	// inline sends copy from it and scatter-to-CQE copies into it, so an
	// address that is not registered memory is an error instead of a fault.
	local localFn
}

// localFn finds registered memory: the whole region registered under lkey
// that holds the n bytes at virtual address addr, and base, the address of
// its first byte; r is nil when there is none.
type localFn func(lkey uint32, addr uint64, n int) (base uint64, r []byte)

// bytes returns just the n bytes at addr, or nil.
func (f localFn) bytes(lkey uint32, addr uint64, n int) []byte {
	base, r := f(lkey, addr, n)
	off, ok := inside(base, r, addr, n)
	if !ok {
		return nil
	}
	return r[off : off+uint64(n) : off+uint64(n)]
}

// inside reports whether the n bytes at addr lie in r, whose first byte is
// at base, and where they start in r. A localFn answers only such an r;
// this check keeps a wrong one from becoming a wild copy.
func inside(base uint64, r []byte, addr uint64, n int) (off uint64, ok bool) {
	off = addr - base // addr < base wraps past len(r)
	return off, r != nil && off <= uint64(len(r)) && uint64(n) <= uint64(len(r))-off
}

// pdLocal is the localFn of a PD.
func pdLocal(pd *uverbs.PD) localFn { return pd.Registered }

// noMRs is the MR generation of a send queue before Created gives it its
// PD's (it never moves).
var noMRs uverbs.Generation

// region is the registered memory the last inline SGE was found in
// (localFn): later SGEs under the same lkey inside it need no lookup. post
// empties it when the PD's MR generation moves, because the MR may have
// been deregistered and its memory unmapped.
type region struct {
	p    unsafe.Pointer
	base uint64 // virtual address of p
	n    uint64 // bytes at p; 0: empty
	lkey uint32
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
	// What post looked up for one WR and keeps for the WRs after it: the
	// AH for the same post only (it may be destroyed between posts), the
	// registered memory while the PD's MR generation stays the same.
	ah      cachedAH // the last UD send's AH
	inl     region   // the last inline SGE's registered memory
	mrGen   *uverbs.Generation
	gen     uint64 // mrGen when inl was last emptied
	stage   []byte // inline data gathered from several SGEs (max_inline_data bytes)
	stagedN int    // bytes in stage
	staged  int    // the WR whose data is in stage; -1: none
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
// The loop that builds WQEs makes no call, so that the compiler keeps its
// values in registers instead of spilling them around a call (a call on
// any path of a Go loop costs every iteration loads and stores): per WQE
// one opcode-table lookup picks the segments, the control segment is two
// 8-byte stores, inline data is copied word by word (copyInline), and
// errors are built after the loop. What needs a call (the first lookup of
// an AH or of the registered memory an inline SGE is in, gathering inline
// data from several SGEs) breaks out of that loop: post does it (prepare),
// keeps its result for the WRs after it (s.ah, s.inl, s.stage) and goes
// back in at the same WR, which then finds what it needs.
func (s *sendQueue) post(wrs []uverbs.SendWR) (int, error) {
	var (
		nreq   int
		fail   uint8 // why wrs[nreq] failed; the error is built after the loop
		need   bool  // wrs[nreq] needs a lookup (prepare) first
		looked = -1  // the WR the last lookup was for
		ctrl   unsafe.Pointer
		size   uint32
		inl    bool
		// the last WQE built whole: what the doorbell names. A WR that
		// fails after its slot was chosen leaves ctrl, size and inl on an
		// unfinished WQE (issue 30, item 1)
		lastCtrl unsafe.Pointer
		lastSize uint32
		lastInl  bool
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
	s.ah, s.staged = cachedAH{}, -1
	if g := s.mrGen.Load(); g != s.gen { // an MR came or went: s.inl may be stale
		s.inl, s.gen = region{}, g
	}
	if s.qpType == uverbs.QPTypeUD && len(wrs) > 0 {
		// Look up the first send's AH before the loop, so that a post of
		// one does not go round twice. A failure is reported when the loop
		// gets to it, after the checks that come first.
		s.prepare(&wrs[0], 0)
	}
	curPost, head := s.curPost, s.head
	// mlx5_wq_overflow: the tail is read again only when the queue looks full.
	room := int(s.maxPost) - int(head-s.tail.Load())
	for {
	wqes:
		for ; nreq < len(wrs); nreq++ {
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
				a := s.ah.av
				if wr.AH != s.ah.h || a == nil {
					need = true
					break wqes
				}
				// set_datagram_seg (the AV in 16-byte words: a 48-byte
				// array assignment would call memmove)
				d, v := (*[3][16]byte)(seg), (*[3][16]byte)(unsafe.Pointer(a))
				d[0], d[1], d[2] = v[0], v[1], v[2]
				put32(seg, 8, wr.RemoteQPN|extendedUDAV)
				put32(seg, 0, wr.RemoteQKey)
				seg = unsafe.Add(seg, datagramSegSize)
				size += datagramSegSize / 16
				if seg == s.end {
					seg = s.buf
				}
			}
			if wr.InlineData != nil || flags&uverbs.SendInline != 0 && len(sgl) > 0 {
				// set_data_inl_seg: the data wraps at the end of the ring.
				var src unsafe.Pointer
				var n int
				switch {
				case wr.InlineData != nil: // the bytes themselves (ibv_wr_set_inline_data)
					src, n = unsafe.Pointer(unsafe.SliceData(wr.InlineData)), len(wr.InlineData)
				case nreq == s.staged: // gathered from several SGEs (gatherInline)
					src, n = unsafe.Pointer(unsafe.SliceData(s.stage)), s.stagedN
				case len(sgl) == 1:
					sg := &sgl[0]
					n = int(sg.Length)
					if n == 0 || n > s.maxInline {
						break
					}
					// Inside the region the post's last SGE was found in?
					off := sg.Addr - s.inl.base // wraps past s.inl.n if below it
					if sg.LKey != s.inl.lkey || off > s.inl.n || uint64(n) > s.inl.n-off {
						need = true
						break wqes
					}
					src = unsafe.Add(s.inl.p, off)
				default:
					need = true
					break wqes
				}
				if n > s.maxInline {
					fail = failInlineLen
					break
				}
				if n > 0 {
					p := unsafe.Add(seg, 4)
					if room := int(uintptr(s.end) - uintptr(p)); n > room {
						copyInline(p, src, room)
						copyInline(s.buf, unsafe.Add(src, room), n-room)
					} else {
						copyInline(p, src, n)
					}
					put32(seg, 0, uint32(n)|inlineSegFlag)
					size += uint32(n+4+15) / 16
				}
				inl = true
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
			lastCtrl, lastSize, lastInl = ctrl, size, inl
			inl = false
		}
		if !need || fail != 0 {
			break
		}
		// wrs[nreq] needs a lookup: do it, then build it (and what follows).
		// A WR that still needs one after its lookup would go round for
		// ever: a bug, reported instead.
		if nreq == looked {
			fail = failLookup
			break
		}
		if fail = s.prepare(&wrs[nreq], nreq); fail != 0 {
			break
		}
		need, looked = false, nreq
	}
	s.curPost = curPost
	racePosted(unsafe.Pointer(s))
	s.ring(uint32(nreq), lastInl, lastSize, lastCtrl)
	if fail != 0 {
		return nreq, s.postErr(fail, &wrs[nreq])
	}
	return nreq, nil
}

// prepare looks up what wrs[i] (wr) needs from outside post's WQE loop
// and keeps it for the loop: its AH's address vector (s.ah), the registered
// memory its one inline SGE is in (s.inl), or its inline data gathered from
// several SGEs (s.stage). It returns why it could not.
func (s *sendQueue) prepare(wr *uverbs.SendWR, i int) (fail uint8) {
	if s.qpType == uverbs.QPTypeUD && (wr.AH != s.ah.h || s.ah.av == nil) {
		a, ok := s.ahAV(wr.AH)
		if !ok {
			return failAH
		}
		s.ah = cachedAH{h: wr.AH, av: a}
	}
	if wr.InlineData != nil || wr.Flags&uverbs.SendInline == 0 {
		return 0
	}
	switch sgl := wr.SGL; {
	case len(sgl) == 1:
		if n := int(sgl[0].Length); n > 0 && n <= s.maxInline && !s.findInline(sgl[0].LKey, sgl[0].Addr, n) {
			return failInlineMem
		}
	case len(sgl) > 1:
		if fail = s.gatherInline(sgl); fail == 0 {
			s.staged = i
		}
	}
	return fail
}

// cachedAH is the AH the post's last UD send went to, and its address
// vector; like region it lives for one post.
type cachedAH struct {
	h  *uverbs.AH
	av *av
}

// findInline looks up the registered region that holds the n bytes at
// addr under lkey into s.inl; false (and s.inl empty) when there is none.
func (s *sendQueue) findInline(lkey uint32, addr uint64, n int) bool {
	base, r := s.local(lkey, addr, n)
	if _, ok := inside(base, r, addr, n); !ok {
		s.inl = region{}
		return false
	}
	s.inl = region{p: unsafe.Pointer(unsafe.SliceData(r)), base: base, n: uint64(len(r)), lkey: lkey}
	return true
}

// gatherInline copies the inline data of several SGEs into s.stage, where
// post then copies it into the WQE from; it fails with failInlineLen past
// max_inline_data and failInlineMem for an SGE outside registered memory.
func (s *sendQueue) gatherInline(sgl []uverbs.SGE) uint8 {
	total := 0
	for i := range sgl {
		n := int(sgl[i].Length)
		if total += n; total > s.maxInline {
			return failInlineLen
		}
		if n == 0 {
			continue
		}
		src := s.local.bytes(sgl[i].LKey, sgl[i].Addr, n)
		if src == nil {
			return failInlineMem
		}
		copy(s.stage[total-n:total], src)
	}
	s.stagedN = total
	return 0
}

// Why a work request failed (post keeps error values out of its loop).
const (
	failOpcode    = 1 + iota // an opcode the QP type does not take
	failFull                 // the SQ holds max_post
	failSGE                  // more SGEs than max_send_sge
	failAH                   // a UD send without an mlx5 AH
	failInlineLen            // inline data beyond max_inline_data
	failInlineMem            // inline data outside registered memory
	failLookup               // still missing what its lookup found (a bug)
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
	case failLookup:
		return postErr("post send", syscall.EINVAL, "internal error: the WR still needs the AH or inline data it was given")
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

// ring mirrors rdma-core qp.c: post_send_db.
func (s *sendQueue) ring(nreq uint32, inl bool, size uint32, ctrl unsafe.Pointer) {
	if nreq == 0 {
		return
	}
	s.head += nreq
	mmio.ToDevice()
	s.dbrec[sndDBR] = be32(s.curPost & 0xffff)
	bf := s.bf
	if bf.lock != nil {
		bf.lock.Lock() // a medium bfreg other QPs write too (post_send_db's mmio_wc_spinlock)
	}
	mmio.WCStart()
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
	if bf.lock != nil {
		bf.lock.Unlock()
	}
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

// copyInline copies n bytes from src to dst without a call (runtime.memmove
// costs a call and a size dispatch per WQE, and a call in post's loop costs
// it registers): 16-byte words, the last one overlapping the one before,
// so that nothing outside [0, n) is read or written; under 16 bytes, two
// overlapping 8-byte words, or single bytes under 8. Written to stay under
// the compiler's inlining budget (go build -gcflags=-m=2 says "can inline").
func copyInline(dst, src unsafe.Pointer, n int) {
	type w16 = [16]byte
	i := 0
	for ; i+16 < n; i += 16 {
		*(*w16)(unsafe.Add(dst, i)) = *(*w16)(unsafe.Add(src, i))
	}
	if n >= 16 {
		*(*w16)(unsafe.Add(dst, n-16)) = *(*w16)(unsafe.Add(src, n-16))
	} else if n >= 8 {
		*(*uint64)(dst) = *(*uint64)(src)
		*(*uint64)(unsafe.Add(dst, n-8)) = *(*uint64)(unsafe.Add(src, n-8))
	} else {
		for ; i < n; i++ {
			*(*byte)(unsafe.Add(dst, i)) = *(*byte)(unsafe.Add(src, i))
		}
	}
}
