package mlx5

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"unsafe"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
	"github.com/ibgo/ibgo/uverbs"
)

// qp is the provider half of a QP. PostSend and PostRecv are each safe to
// call concurrently (a lock per queue, like libmlx5's sq.lock/rq.lock); the
// CQ poll that retires WQEs takes the CQ's lock, and reads of head/tail
// between the two are libmlx5's mlx5_wq_overflow race, resolved the same way
// (the check is conservative: a stale tail only reports full early).
type qp struct {
	ctx   *Context
	mem   []byte
	req   abi.Mlx5CreateQP
	lay   qpLayout
	res   resource
	uidx  uint32
	sqMu  sync.Mutex
	rqMu  sync.Mutex
	sq    sendQueue
	rq    recvQueue
	srq   *srq
	hasRQ bool
	scq   *cq // the send and receive CQs, cleaned on Destroy
	rcq   *cq
}

// SupportedSendOps are the operations the extended work-request API
// (uverbs.QPEx) can post on an mlx5 QP: those its WQE builder encodes
// (uverbs.QPEx hands its batch to PostSend). rdma-core's mlx5 has more
// (LOCAL_INV, BIND_MW, TSO, its own DC/UMR ops); ibgo's builder does not.
func (c *Context) SupportedSendOps(t uverbs.QPType) uverbs.SendOps {
	switch t {
	case uverbs.QPTypeRC:
		return uverbs.SendOpRDMAWrite | uverbs.SendOpRDMAWriteWithImm | uverbs.SendOpSend | uverbs.SendOpSendWithImm |
			uverbs.SendOpRDMARead | uverbs.SendOpAtomicCmpAndSwp | uverbs.SendOpAtomicFetchAdd | uverbs.SendOpSendWithInv
	case uverbs.QPTypeUC:
		return uverbs.SendOpRDMAWrite | uverbs.SendOpRDMAWriteWithImm | uverbs.SendOpSend | uverbs.SendOpSendWithImm
	case uverbs.QPTypeUD:
		return uverbs.SendOpSend | uverbs.SendOpSendWithImm
	}
	return 0
}

// NewQP mirrors rdma-core verbs.c: create_qp for RC, UC and UD: the buffer
// (RQ first, SQ after it), a doorbell record, a user index (cqe_version 1)
// and MLX5_QP_FLAG_SCATTER_CQE, as libmlx5 sets by default. Like libmlx5 it
// writes the max_inline_data it can offer back into attr.Cap, which is what
// the kernel is told.
func (c *Context) NewQP(attr *uverbs.QPInitAttr) (uverbs.QPDriver, error) {
	if c.bfs == nil && !c.dynMode {
		return nil, fmt.Errorf("%w: the mlx5 context has no UAR pages mapped", uverbs.ErrNotSupported)
	}
	lay, err := calcQP(attr.Type, attr.Cap, attr.SRQ != nil, &c.Resp)
	if err != nil {
		return nil, err
	}
	if lay.sqWQECnt > 0 {
		attr.Cap.MaxInlineData = lay.cap.MaxInlineData
	}
	// A QP with neither queue still gets a page: the kernel wants a buffer.
	mem, err := sys.MmapAnon(pageRound(max(int(lay.bufSize), 1)), 0)
	if err != nil {
		return nil, fmt.Errorf("mlx5: QP buffer: %w", err)
	}
	db, err := c.allocDB()
	if err != nil {
		sys.Munmap(mem)
		return nil, err
	}
	q := &qp{ctx: c, mem: mem, lay: lay, hasRQ: attr.SRQ == nil}
	base := unsafe.Pointer(&mem[0])
	dbrec := (*[2]uint32)(db)
	*dbrec = [2]uint32{}
	sqBase := unsafe.Add(base, lay.sqOffset)
	q.sq = sendQueue{
		wq: wq{wrid: make([]uint64, lay.sqWQECnt), wqeHead: make([]uint32, lay.sqWQECnt), wqeCnt: lay.sqWQECnt,
			maxPost: lay.cap.MaxSendWR, maxGS: int(lay.cap.MaxSendSGE), buf: sqBase, shift: sendWQEBBSh},
		end: unsafe.Add(sqBase, lay.sqWQECnt*sendWQEBB), qpType: attr.Type, maxInline: int(lay.cap.MaxInlineData), stage: make([]byte, lay.cap.MaxInlineData),
		dbrec: dbrec, preferBF: true, ahAV: ahAV, mrGen: &noMRs,
	}
	if attr.SigAll {
		q.sq.sigBits = ctrlCQUpdate
	}
	q.rq = recvQueue{wq: wq{wrid: make([]uint64, lay.rqWQECnt), wqeCnt: lay.rqWQECnt, maxPost: lay.cap.MaxRecvWR,
		maxGS: int(lay.cap.MaxRecvSGE), buf: base, shift: lay.rqShift}, dbrec: dbrec}
	q.res = resource{typ: attr.Type, sq: &q.sq, rq: &q.rq}
	if attr.SendCQ != nil && attr.RecvCQ != nil {
		q.scq, _ = attr.SendCQ.Driver().(*cq)
		q.rcq, _ = attr.RecvCQ.Driver().(*cq)
	}
	if attr.SRQ != nil {
		s, ok := attr.SRQ.Driver().(*srq)
		if !ok {
			sys.Munmap(mem)
			return nil, postErr("create qp", syscall.EINVAL, "the SRQ is not an mlx5 SRQ")
		}
		q.srq, q.res.srq, q.res.rq = s, &s.q, nil
	}
	c.mu.Lock()
	q.uidx, err = c.rsc.store(&q.res)
	c.mu.Unlock()
	if err != nil {
		sys.Munmap(mem)
		return nil, err
	}
	q.req = abi.Mlx5CreateQP{BufAddr: sys.Addr(mem), DBAddr: uint64(uintptr(db)), SQWQECount: lay.sqWQECnt,
		RQWQECount: lay.rqWQECnt, RQWQEShift: uint32(lay.rqShift), Flags: qpFlagScatterCQE, UIDX: q.uidx}
	if lay.rqWQECnt == 0 {
		q.req.RQWQEShift = 0
	}
	bf, err := c.getBfreg()
	if err != nil {
		q.Destroy()
		return nil, err
	}
	if bf != nil {
		// Dynamic UARs: name the UAR page (rdma-core create_qp with
		// MLX5_QP_FLAG_UAR_PAGE_INDEX); the bfreg is ours alone.
		q.sq.bf = bf
		q.req.Flags |= qpFlagUARPageIndex
		q.req.BfregIndex = bf.pageID
	}
	return q, nil
}

func (q *qp) DriverData() uverbs.DriverData {
	return uverbs.DriverData{In: driverBytes(&q.req), OutLen: int(unsafe.Sizeof(abi.Mlx5CreateQPResp{}))}
}

// Created takes the kernel's bfreg (static bfregs: the gross index it chose).
func (q *qp) Created(p *uverbs.QP, out []byte) error {
	if len(out) < 4 {
		return errors.New("mlx5: short create_qp response")
	}
	if q.sq.bf == nil {
		bfi := (*abi.Mlx5CreateQPResp)(unsafe.Pointer(&out[0])).BfregIndex
		if int(bfi) >= len(q.ctx.bfs) {
			return fmt.Errorf("mlx5: the kernel gave bfreg %d, the context has %d", bfi, len(q.ctx.bfs))
		}
		q.sq.bf = &q.ctx.bfs[bfi]
	}
	q.sq.qpn = p.QPN()
	q.res.qpn = p.QPN()
	q.sq.local, q.sq.mrGen = pdLocal(p.PD()), p.PD().MRGeneration()
	q.rq.local = q.sq.local
	return nil
}

// PostSend posts wr in order (rdma-core mlx5_post_send). It allocates nothing.
func (q *qp) PostSend(wr []uverbs.SendWR) (int, error) {
	q.sqMu.Lock()
	n, err := q.sq.post(wr)
	q.sqMu.Unlock()
	return n, err
}

// PostRecv posts wr to the QP's receive queue (rdma-core mlx5_post_recv).
func (q *qp) PostRecv(wr []uverbs.RecvWR) (int, error) {
	if !q.hasRQ {
		return 0, postErr("post recv", syscall.EINVAL, "the QP receives from an SRQ")
	}
	q.rqMu.Lock()
	n, err := q.rq.post(wr)
	q.rqMu.Unlock()
	return n, err
}

// Destroy takes both queue locks so that a post in flight finishes before
// the buffer is unmapped and the bfreg returned; later posts see the nil
// buffer and return ErrClosed.
//
// Before that it mirrors rdma-core verbs.c: mlx5_destroy_qp: under both CQ
// locks it drops the QP's unpolled CQEs (__mlx5_cq_clean, returning SRQ
// WQEs) and forgets its user index, so a poll running now finishes first
// and a later one never looks the QP up.
func (q *qp) Destroy() error {
	unlock := lockCQs(q.scq, q.rcq)
	// Only while the index is still ours: a second Destroy must not clean
	// or forget a newer QP that reuses it.
	if q.ctx.rsc.find(q.uidx) == &q.res {
		if q.rcq != nil {
			var s *srqQueue
			if q.srq != nil {
				s = &q.srq.q
			}
			q.rcq.ring.clean(q.uidx, s)
		}
		if q.scq != nil && q.scq != q.rcq {
			q.scq.ring.clean(q.uidx, nil)
		}
		q.ctx.mu.Lock()
		q.ctx.rsc.clear(q.uidx)
		q.ctx.mu.Unlock()
	}
	unlock()
	q.sqMu.Lock()
	q.rqMu.Lock()
	defer q.rqMu.Unlock()
	defer q.sqMu.Unlock()
	if q.mem == nil {
		return nil
	}
	q.ctx.putBfreg(q.sq.bf)
	q.sq.bf = nil
	q.sq.buf, q.sq.end, q.rq.buf = nil, nil, nil
	q.ctx.freeDB(unsafe.Pointer(q.sq.dbrec))
	m := q.mem
	q.mem = nil
	return sys.Munmap(m)
}

// srq is the provider half of an SRQ; PostRecv is safe to call concurrently.
type srq struct {
	ctx *Context
	mem []byte
	req abi.Mlx5CreateSRQ
	q   srqQueue
}

// NewSRQ mirrors rdma-core verbs.c: mlx5_create_srq and
// mlx5_alloc_srq_buf: a free list of max = roundup_pow2(max_wr+1) WQEs,
// followed by as many again (libmlx5's wait queue, unused here); the
// kernel is told the whole buffer (2*max-1 WRs) and the SGEs a WQE holds.
func (c *Context) NewSRQ(attr *uverbs.SRQInitAttr) (uverbs.SRQDriver, error) {
	maxN, total, maxGS, shift, err := calcSRQ(attr.MaxWR, attr.MaxSGE, &c.Resp)
	if err != nil {
		return nil, err
	}
	mem, err := sys.MmapAnon(pageRound(int(total)<<shift), 0)
	if err != nil {
		return nil, fmt.Errorf("mlx5: SRQ buffer: %w", err)
	}
	db, err := c.allocDB()
	if err != nil {
		sys.Munmap(mem)
		return nil, err
	}
	s := &srq{ctx: c, mem: mem}
	s.q = srqQueue{buf: unsafe.Pointer(&mem[0]), wrid: make([]uint64, total), max: maxN, maxGS: maxGS, shift: shift, dbrec: (*uint32)(db)}
	*s.q.dbrec = 0
	s.q.init()
	attr.MaxWR, attr.MaxSGE = total-1, uint32(maxGS)
	s.req = abi.Mlx5CreateSRQ{BufAddr: sys.Addr(mem), DBAddr: uint64(uintptr(db))}
	return s, nil
}

func (s *srq) DriverData() uverbs.DriverData {
	return uverbs.DriverData{In: driverBytes(&s.req), OutLen: int(unsafe.Sizeof(abi.Mlx5CreateSRQResp{}))}
}

func (s *srq) Created(u *uverbs.SRQ, out []byte) error {
	s.q.local = pdLocal(u.PD())
	return nil
}

// errSRQResize: the mlx5 kernel driver refuses IB_SRQ_MAX_WR in
// mlx5_ib_modify_srq (EINVAL), so MODIFY_SRQ with it is not sent.
var errSRQResize = fmt.Errorf("%w: resizing an mlx5 SRQ (the kernel's mlx5_ib_modify_srq refuses max_wr)", uverbs.ErrNotSupported)

// ModifyData refuses a resize before it is sent (DriverData.Refuse);
// arming the limit needs nothing from the provider.
func (s *srq) ModifyData(attr *uverbs.SRQAttr, mask uverbs.SRQAttrMask, scratch func(n int) []byte) uverbs.DriverData {
	if mask&uverbs.SRQAttrMaxWR != 0 {
		return uverbs.DriverData{Refuse: errSRQResize}
	}
	return uverbs.DriverData{}
}

func (s *srq) Modified(_ *uverbs.SRQ, _ *uverbs.SRQAttr, mask uverbs.SRQAttrMask, err error) error {
	return err
}

// PostRecv mirrors rdma-core srq.c: mlx5_post_srq_recv, under the SRQ's
// lock, which the CQ poll also takes to return WQEs to the free list.
func (s *srq) PostRecv(wr []uverbs.RecvWR) (int, error) {
	return s.q.post(wr)
}

// Destroy unmaps the buffer under the SRQ's lock: a post (or a CQ poll
// freeing a WQE) in flight finishes first, later ones see the nil buffer
// and return ErrClosed.
func (s *srq) Destroy() error {
	s.q.mu.Lock()
	defer s.q.mu.Unlock()
	if s.mem == nil {
		return nil
	}
	m := s.mem
	s.mem, s.q.buf = nil, nil
	s.ctx.freeDB(unsafe.Pointer(s.q.dbrec))
	return sys.Munmap(m)
}

// ah is an mlx5 address handle: the address vector UD WQEs copy.
type ah struct {
	ctx *Context
	p   AVParams
	av  av
}

func ahAV(a *uverbs.AH) (*av, bool) {
	if a == nil {
		return nil, false
	}
	h, ok := a.Driver().(*ah)
	if !ok {
		return nil, false
	}
	return &h.av, true
}

// NewAH mirrors rdma-core verbs.c: mlx5_create_ah. On Ethernet the AV
// must be global, RoCE v2 source GIDs get a UDP source port (from the flow
// label, else random like libmlx5) and the destination MAC comes from the
// CREATE_AH driver response; on InfiniBand the AV carries the LID route and
// GRH bit. The port's link layer and the GID type come from the context
// (Opened); without it a global AH is taken for RoCE v2.
func (c *Context) NewAH(attr *uverbs.AHAttr) (uverbs.AHDriver, error) {
	eth, v2 := attr.IsGlobal, attr.IsGlobal
	if c.uc != nil {
		pa, err := c.uc.QueryPort(attr.Port)
		if err != nil {
			return nil, err
		}
		eth = pa.LinkLayer == uverbs.LinkLayerEthernet
		v2 = false
		const grhRequired = 1 // IBV_QPF_GRH_REQUIRED
		if !attr.IsGlobal && (eth || pa.Flags&grhRequired != 0) {
			return nil, postErr("create ah", syscall.EINVAL, "the port needs global addresses (IsGlobal with a GRH)")
		}
		if eth {
			gids, err := c.uc.QueryGIDTable()
			if err != nil {
				return nil, err
			}
			for _, g := range gids {
				if g.Port == uint32(attr.Port) && g.Index == uint32(attr.GRH.SGIDIndex) {
					v2 = g.Type == uverbs.GIDTypeRoCEv2
				}
			}
		}
	}
	p := AVParams{Ethernet: eth, RoCEv2: v2, UDPSrcPort: uint16(0xc000 + rand.IntN(0x4000)),
		SL: attr.SL, StaticRate: attr.StaticRate, SrcPathBits: attr.SrcPathBits, DLID: attr.DLID, IsGlobal: attr.IsGlobal,
		SGIDIndex: attr.GRH.SGIDIndex, FlowLabel: attr.GRH.FlowLabel, HopLimit: attr.GRH.HopLimit,
		TrafficClass: attr.GRH.TrafficClass, DGID: attr.GRH.DGID}
	return &ah{ctx: c, p: p, av: buildAV(p)}, nil
}

func (a *ah) DriverData() uverbs.DriverData {
	return uverbs.DriverData{OutLen: int(unsafe.Sizeof(abi.Mlx5CreateAHResp{}))}
}

func (a *ah) Created(_ *uverbs.AH, out []byte) error {
	if a.p.Ethernet && len(out) >= 10 {
		copy(a.p.DMAC[:], out[4:10])
		a.av = buildAV(a.p)
	}
	return nil
}

// Cap is what libmlx5 reports back to the application for this QP, its own
// sizes where it has them (max_send_wr 21 where the kernel echoes the 16
// asked for).
func (q *qp) Cap() uverbs.QPCap { return q.lay.cap }

var (
	_ uverbs.QPCapReporter  = (*qp)(nil)
	_ uverbs.SRQCapReporter = (*srq)(nil)
)

// CreatedCap mirrors the end of rdma-core verbs.c: create_qp: max_send_wr,
// max_recv_wr and max_recv_sge are libmlx5's (sq.max_post, rq.max_post,
// rq.max_gs); max_send_sge and max_inline_data stay the kernel's answer
// (libmlx5 told it its own max_inline_data).
func (q *qp) CreatedCap(k uverbs.QPCap) uverbs.QPCap {
	k.MaxSendWR, k.MaxRecvWR, k.MaxRecvSGE = q.lay.cap.MaxSendWR, q.lay.cap.MaxRecvWR, q.lay.cap.MaxRecvSGE
	return k
}

// QueriedCap mirrors rdma-core verbs.c: mlx5_query_qp: the send sizes are
// libmlx5's (sq.max_post, sq.max_gs, max_inline_data), the receive sizes
// the kernel's.
func (q *qp) QueriedCap(k uverbs.QPCap) uverbs.QPCap {
	k.MaxSendWR, k.MaxSendSGE, k.MaxInlineData = q.lay.cap.MaxSendWR, q.lay.cap.MaxSendSGE, q.lay.cap.MaxInlineData
	return k
}

// Attr is what libmlx5 reports back for this SRQ: max_wr is the free
// list's usable length, not the 2*max-1 the kernel was told.
func (s *srq) Attr() uverbs.SRQAttr {
	return uverbs.SRQAttr{MaxWR: s.q.max - 1, MaxSGE: uint32(s.q.maxGS)}
}

// CreatedCap mirrors rdma-core verbs.c: mlx5_create_srq after the command:
// max_wr = srq->tail (the free list's usable length; the kernel was told
// the wait queue too), max_sge = srq->max_gs.
func (s *srq) CreatedCap(_, _ uint32) (uint32, uint32) {
	a := s.Attr()
	return a.MaxWR, a.MaxSGE
}

// lockCQs takes the locks of a QP's CQs in CQN order, as rdma-core
// verbs.c: mlx5_lock_cqs, so that two QPs destroyed at once over the same
// CQs cannot deadlock. Either may be nil.
func lockCQs(s, r *cq) (unlock func()) {
	switch {
	case s == nil && r == nil:
		return func() {}
	case s == nil || s == r:
		r.mu.Lock()
		return r.mu.Unlock
	case r == nil:
		s.mu.Lock()
		return s.mu.Unlock
	}
	a, b := s, r
	if b.ring.cqn < a.ring.cqn || (b.ring.cqn == a.ring.cqn && uintptr(unsafe.Pointer(b)) < uintptr(unsafe.Pointer(a))) {
		a, b = b, a
	}
	a.mu.Lock()
	b.mu.Lock()
	return func() { b.mu.Unlock(); a.mu.Unlock() }
}
