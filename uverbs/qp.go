package uverbs

import (
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
)

// QPType is a queue pair's transport (enum ibv_qp_type).
type QPType uint8

const (
	QPTypeRC QPType = abi.IB_UVERBS_QPT_RC
	QPTypeUC QPType = abi.IB_UVERBS_QPT_UC
	QPTypeUD QPType = abi.IB_UVERBS_QPT_UD
)

func (t QPType) String() string {
	switch t {
	case QPTypeRC:
		return "RC"
	case QPTypeUC:
		return "UC"
	case QPTypeUD:
		return "UD"
	}
	return "QPType(" + strconv.Itoa(int(t)) + ")"
}

// QPState is a queue pair's state (enum ibv_qp_state).
type QPState uint8

const (
	QPStateReset QPState = 0
	QPStateInit  QPState = 1
	QPStateRTR   QPState = 2
	QPStateRTS   QPState = 3
	QPStateSQD   QPState = 4
	QPStateSQE   QPState = 5
	QPStateErr   QPState = 6
)

func (s QPState) String() string {
	switch s {
	case QPStateReset:
		return "RESET"
	case QPStateInit:
		return "INIT"
	case QPStateRTR:
		return "RTR"
	case QPStateRTS:
		return "RTS"
	case QPStateSQD:
		return "SQD"
	case QPStateSQE:
		return "SQE"
	case QPStateErr:
		return "ERR"
	}
	return "QPState(" + strconv.Itoa(int(s)) + ")"
}

// QPAttrMask selects the QPAttr fields a Modify or Query uses (enum ibv_qp_attr_mask).
type QPAttrMask uint32

const (
	QPAttrState            QPAttrMask = 1 << 0 // QPAttr.State
	QPAttrCurState         QPAttrMask = 1 << 1
	QPAttrEnSQDAsyncNotify QPAttrMask = 1 << 2
	QPAttrAccessFlags      QPAttrMask = 1 << 3
	QPAttrPkeyIndex        QPAttrMask = 1 << 4
	QPAttrPort             QPAttrMask = 1 << 5
	QPAttrQKey             QPAttrMask = 1 << 6
	QPAttrAV               QPAttrMask = 1 << 7
	QPAttrPathMTU          QPAttrMask = 1 << 8
	QPAttrTimeout          QPAttrMask = 1 << 9
	QPAttrRetryCnt         QPAttrMask = 1 << 10
	QPAttrRNRRetry         QPAttrMask = 1 << 11
	QPAttrRQPSN            QPAttrMask = 1 << 12
	QPAttrMaxQPRdAtomic    QPAttrMask = 1 << 13
	QPAttrAltPath          QPAttrMask = 1 << 14
	QPAttrMinRNRTimer      QPAttrMask = 1 << 15
	QPAttrSQPSN            QPAttrMask = 1 << 16
	QPAttrMaxDestRdAtomic  QPAttrMask = 1 << 17
	QPAttrPathMigState     QPAttrMask = 1 << 18
	QPAttrCap              QPAttrMask = 1 << 19
	QPAttrDestQPN          QPAttrMask = 1 << 20
	QPAttrRateLimit        QPAttrMask = 1 << 25
)

// QPCap are a queue pair's queue sizes.
type QPCap struct {
	MaxSendWR     uint32
	MaxRecvWR     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
}

// GlobalRoute is an address vector's GRH part (struct ibv_global_route);
// RoCE always needs it.
type GlobalRoute struct {
	DGID         GID
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
}

// AHAttr is an address vector (struct ibv_ah_attr).
type AHAttr struct {
	GRH         GlobalRoute
	DLID        uint16
	SL          uint8
	SrcPathBits uint8
	StaticRate  uint8
	IsGlobal    bool
	Port        uint8
}

// QPAttr are the attributes Modify sets and Query reports (struct ibv_qp_attr).
type QPAttr struct {
	State            QPState
	CurState         QPState
	PathMTU          MTU
	PathMigState     uint8
	QKey             uint32
	RQPSN            uint32
	SQPSN            uint32
	DestQPN          uint32
	AccessFlags      Access
	Cap              QPCap
	AH               AHAttr
	AltAH            AHAttr
	PkeyIndex        uint16
	AltPkeyIndex     uint16
	EnSQDAsyncNotify bool
	SQDraining       bool
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRNRTimer      uint8
	Port             uint8
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
	AltPort          uint8
	AltTimeout       uint8
	RateLimit        uint32 // kbps
}

// QPInitAttr describes a new QP.
type QPInitAttr struct {
	Type   QPType
	SendCQ *CQ
	RecvCQ *CQ
	SRQ    *SRQ // receive from this SRQ instead of the QP's own receive queue
	Cap    QPCap
	SigAll bool // every send completes (otherwise only SendSignaled ones)
	// SendOps, when not zero, gives the QP a QPEx (QP.Ex) for these
	// operations (ibv_create_qp_ex with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS).
	// The flags are user-space state only: the kernel's create command is
	// the same (rdma-core sends them nowhere either). The provider must
	// support them for the QP type, and SendOpFlush / SendOpAtomicWrite
	// need the device to (ErrNotSupported otherwise).
	SendOps SendOps
}

// QP is a queue pair.
//
// Concurrency: every method is safe for concurrent use. PostSend and
// PostRecv may each be called from several goroutines (the provider
// serialises each queue, as rdma-core's providers lock theirs); Modify,
// Query, AttachMcast and DetachMcast are serialised with every other command
// of the Context; Close makes later posts return ErrClosed.
type QP struct {
	object
	pd     *PD
	drv    QPDriver
	typ    QPType
	qpn    uint32
	cap    QPCap
	sigAll bool
	sendCQ *CQ
	recvCQ *CQ
	srq    *SRQ
	state  atomic.Uint32 // QPState of the last successful Modify
	ex     *QPEx         // nil unless created with SendOps
}

// QPN is the queue pair number peers address.
func (qp *QP) QPN() uint32 { return qp.qpn }

// Type is the transport.
func (qp *QP) Type() QPType { return qp.typ }

// Cap is the queue sizes granted (at least those requested): the kernel's
// answer, or the provider's own where its rdma-core counterpart reports
// those (QPCapReporter; libmlx5's max_send_wr from its ring).
func (qp *QP) Cap() QPCap { return qp.cap }

// SigAll reports whether every send generates a completion.
func (qp *QP) SigAll() bool { return qp.sigAll }

// State is the state of the last successful Modify (Query asks the kernel).
func (qp *QP) State() QPState { return QPState(qp.state.Load()) }

func (qp *QP) setState(s QPState) { qp.state.Store(uint32(s)) }

// SendCQ, RecvCQ, SRQ and PD return what the QP was created with.
func (qp *QP) SendCQ() *CQ { return qp.sendCQ }
func (qp *QP) RecvCQ() *CQ { return qp.recvCQ }
func (qp *QP) SRQ() *SRQ   { return qp.srq }
func (qp *QP) PD() *PD     { return qp.pd }

// Driver returns the provider's half of the QP.
func (qp *QP) Driver() QPDriver { return qp.drv }

// CreateQP creates a queue pair in the RESET state (QP_CREATE ioctl, or CREATE_QP).
func (pd *PD) CreateQP(attr QPInitAttr) (*QP, error) {
	op := "create qp"
	if err := pd.check(); err != nil {
		return nil, opErr("", op, err)
	}
	c := pd.ctx
	if err := checkQPInit(c, &attr); err != nil {
		return nil, &Error{Op: op, Device: c.dev.Name, Err: err}
	}
	if err := checkSendOps(c, &attr); err != nil {
		return nil, opErr(c.dev.Name, op, err)
	}
	drv, err := c.prov.NewQP(&attr)
	if err != nil {
		return nil, opErr(c.dev.Name, op, err)
	}
	var srqObj *object
	if attr.SRQ != nil {
		srqObj = &attr.SRQ.object
	}
	if err := c.lock(&pd.object, &attr.SendCQ.object, &attr.RecvCQ.object, srqObj); err != nil {
		drv.Destroy()
		return nil, opErr(c.dev.Name, op, err)
	}
	defer c.mu.Unlock()
	qp := &QP{pd: pd, drv: drv, typ: attr.Type, sigAll: attr.SigAll, sendCQ: attr.SendCQ, recvCQ: attr.RecvCQ, srq: attr.SRQ}
	err = c.create(&qp.object, qp, qp.createCmd(c, &attr, drv.DriverData()),
		func(out []byte) error { return drv.Created(qp, out) }, drv.Destroy)
	if err != nil {
		return nil, err
	}
	if r, ok := drv.(QPCapReporter); ok {
		qp.cap = r.CreatedCap(qp.cap)
	}
	if attr.SendOps != 0 {
		qp.ex = newQPEx(qp, attr.SendOps)
	}
	return qp, nil
}

// checkQPInit validates what the kernel would refuse less clearly.
func checkQPInit(c *Context, attr *QPInitAttr) error {
	switch attr.Type {
	case QPTypeRC, QPTypeUC, QPTypeUD:
	default:
		return fmt.Errorf("%w: QP type %s (ibgo supports RC, UC and UD)", ErrNotSupported, attr.Type)
	}
	if attr.SendCQ == nil || attr.RecvCQ == nil {
		return fmt.Errorf("%w: a QP needs a send CQ and a receive CQ", sys.NewErrno(sys.EINVAL))
	}
	objs := []*object{&attr.SendCQ.object, &attr.RecvCQ.object}
	if attr.SRQ != nil {
		objs = append(objs, &attr.SRQ.object)
	}
	for _, o := range objs {
		if err := o.check(); err != nil {
			return err
		}
		if o.ctx != c {
			return fmt.Errorf("%w: %s belongs to another context", sys.NewErrno(sys.EINVAL), o)
		}
	}
	return nil
}

// createCmd describes QP creation: the QP_CREATE ioctl and CREATE_QP.
func (qp *QP) createCmd(c *Context, attr *QPInitAttr, dd DriverData) *createCmd {
	return &createCmd{kind: kindQP, op: "create qp", drv: dd,
		method: abi.UVERBS_METHOD_QP_CREATE, handleAttr: abi.UVERBS_ATTR_CREATE_QP_HANDLE,
		ioctl: func(cmd *sys.IoctlCmd, id uint64) func() {
			cmd.IDR(abi.UVERBS_ATTR_CREATE_QP_PD_HANDLE, qp.pd.handle)
			cmd.IDR(abi.UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE, attr.SendCQ.handle)
			cmd.IDR(abi.UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE, attr.RecvCQ.handle)
			if attr.SRQ != nil {
				cmd.IDR(abi.UVERBS_ATTR_CREATE_QP_SRQ_HANDLE, attr.SRQ.handle)
			}
			cmd.Const(abi.UVERBS_ATTR_CREATE_QP_TYPE, uint64(attr.Type))
			cmd.U64(abi.UVERBS_ATTR_CREATE_QP_USER_HANDLE, id)
			capIn := abi.QPCap{MaxSendWR: attr.Cap.MaxSendWR, MaxRecvWR: attr.Cap.MaxRecvWR, MaxSendSGE: attr.Cap.MaxSendSGE,
				MaxRecvSGE: attr.Cap.MaxRecvSGE, MaxInlineData: attr.Cap.MaxInlineData}
			cmd.PtrIn(abi.UVERBS_ATTR_CREATE_QP_CAP, abi.Bytes(&capIn))
			cmd.FD(abi.UVERBS_ATTR_CREATE_QP_EVENT_FD, c.asyncFD.Int())
			if attr.SigAll {
				cmd.U32(abi.UVERBS_ATTR_CREATE_QP_FLAGS, abi.IB_UVERBS_QP_CREATE_SQ_SIG_ALL)
			}
			respCap := cmd.PtrOut(abi.UVERBS_ATTR_CREATE_QP_RESP_CAP, abi.Size[abi.QPCap]())
			respQPN := cmd.PtrOut(abi.UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, 4)
			return func() {
				r := abi.As[abi.QPCap](respCap)
				qp.qpn = le32(respQPN)
				qp.cap = QPCap{r.MaxSendWR, r.MaxRecvWR, r.MaxSendSGE, r.MaxRecvSGE, r.MaxInlineData}
			}
		},
		writeCmd: abi.IB_USER_VERBS_CMD_CREATE_QP, writeOutLen: abi.Size[abi.CreateQPResp](),
		writeIn: func(id uint64) []byte {
			r, b := alloc[abi.CreateQP](c)
			r.UserHandle, r.PDHandle = id, qp.pd.handle
			r.SendCQHandle, r.RecvCQHandle = attr.SendCQ.handle, attr.RecvCQ.handle
			if attr.SRQ != nil {
				r.SRQHandle, r.IsSRQ = attr.SRQ.handle, 1
			}
			r.MaxSendWR, r.MaxRecvWR = attr.Cap.MaxSendWR, attr.Cap.MaxRecvWR
			r.MaxSendSGE, r.MaxRecvSGE, r.MaxInlineData = attr.Cap.MaxSendSGE, attr.Cap.MaxRecvSGE, attr.Cap.MaxInlineData
			if attr.SigAll {
				r.SQSigAll = 1
			}
			r.QPType = uint8(attr.Type)
			return b
		},
		writeParse: func(out []byte) uint32 {
			r := abi.As[abi.CreateQPResp](out)
			qp.qpn = r.QPN
			qp.cap = QPCap{r.MaxSendWR, r.MaxRecvWR, r.MaxSendSGE, r.MaxRecvSGE, r.MaxInlineData}
			return r.QPHandle
		},
		errMap: func(err error) error { return memlockErr(c.dev.Name, "create qp", err) },
	}
}

func toDest(a AHAttr) abi.QPDest {
	d := abi.QPDest{DGID: a.GRH.DGID, FlowLabel: a.GRH.FlowLabel, DLID: a.DLID, SGIDIndex: a.GRH.SGIDIndex,
		HopLimit: a.GRH.HopLimit, TrafficClass: a.GRH.TrafficClass, SL: a.SL, SrcPathBits: a.SrcPathBits,
		StaticRate: a.StaticRate, PortNum: a.Port}
	if a.IsGlobal {
		d.IsGlobal = 1
	}
	return d
}

func fromDest(d abi.QPDest) AHAttr {
	return AHAttr{GRH: GlobalRoute{DGID: d.DGID, FlowLabel: d.FlowLabel, SGIDIndex: d.SGIDIndex, HopLimit: d.HopLimit,
		TrafficClass: d.TrafficClass}, DLID: d.DLID, SL: d.SL, SrcPathBits: d.SrcPathBits, StaticRate: d.StaticRate,
		IsGlobal: d.IsGlobal != 0, Port: d.PortNum}
}

// Modify changes the attributes mask selects (MODIFY_QP, or EX_MODIFY_QP for
// a rate limit). The kernel checks the transition and the attributes it
// requires (kernel core/verbs.c: qp_state_table) and answers EINVAL for a
// missing or extra one.
func (qp *QP) Modify(attr *QPAttr, mask QPAttrMask) error {
	op := "modify qp"
	if mask&QPAttrState != 0 {
		op = "modify qp to " + attr.State.String()
	}
	if err := qp.check(); err != nil {
		return opErr("", op, err)
	}
	c := qp.ctx
	if err := c.lock(&qp.object); err != nil {
		return opErr(c.dev.Name, op, err)
	}
	defer c.mu.Unlock()
	ex := mask&QPAttrRateLimit != 0
	size := abi.Size[abi.ModifyQP]()
	if ex {
		size = abi.Size[abi.ExModifyQP]()
	}
	in := c.arena.Alloc(size)
	m := abi.As[abi.ModifyQP](in)
	m.Dest, m.AltDest = toDest(attr.AH), toDest(attr.AltAH)
	m.QPHandle, m.AttrMask = qp.handle, uint32(mask)
	m.QKey, m.RQPSN, m.SQPSN, m.DestQPNum = attr.QKey, attr.RQPSN, attr.SQPSN, attr.DestQPN
	m.QPAccessFlags = uint32(attr.AccessFlags)
	m.PkeyIndex, m.AltPkeyIndex = attr.PkeyIndex, attr.AltPkeyIndex
	m.QPState, m.CurQPState = uint8(attr.State), uint8(attr.CurState)
	m.PathMTU, m.PathMigState = uint8(attr.PathMTU), attr.PathMigState
	if attr.EnSQDAsyncNotify {
		m.EnSQDAsyncNotify = 1
	}
	m.MaxRdAtomic, m.MaxDestRdAtomic, m.MinRNRTimer = attr.MaxRdAtomic, attr.MaxDestRdAtomic, attr.MinRNRTimer
	m.PortNum, m.Timeout, m.RetryCnt, m.RNRRetry = attr.Port, attr.Timeout, attr.RetryCnt, attr.RNRRetry
	m.AltPortNum, m.AltTimeout = attr.AltPort, attr.AltTimeout
	w := &sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_MODIFY_QP, CoreIn: in}
	if ex {
		abi.As[abi.ExModifyQP](in).RateLimit = attr.RateLimit
		w.Cmd, w.Extended = abi.IB_USER_VERBS_EX_CMD_MODIFY_QP, true
		w.CoreOut = c.arena.Alloc(abi.Size[abi.ExModifyQPResp]())
	}
	if err := c.execWrite(w); err != nil {
		return opErr(c.dev.Name, op, err)
	}
	if mask&QPAttrState != 0 {
		qp.setState(attr.State)
	}
	return nil
}

// Query reports the QP's attributes (QUERY_QP) and its creation attributes.
func (qp *QP) Query(mask QPAttrMask) (*QPAttr, *QPInitAttr, error) {
	if err := qp.check(); err != nil {
		return nil, nil, opErr("", "query qp", err)
	}
	c := qp.ctx
	if err := c.lock(&qp.object); err != nil {
		return nil, nil, opErr(c.dev.Name, "query qp", err)
	}
	defer c.mu.Unlock()
	q, in := alloc[abi.QueryQP](c)
	q.QPHandle, q.AttrMask = qp.handle, uint32(mask)
	out := c.arena.Alloc(abi.Size[abi.QueryQPResp]())
	if err := c.execWrite(&sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_QUERY_QP, CoreIn: in, CoreOut: out}); err != nil {
		return nil, nil, opErr(c.dev.Name, "query qp", err)
	}
	r := abi.As[abi.QueryQPResp](out)
	a := &QPAttr{State: QPState(r.QPState), CurState: QPState(r.CurQPState), PathMTU: MTU(r.PathMTU),
		PathMigState: r.PathMigState, QKey: r.QKey, RQPSN: r.RQPSN, SQPSN: r.SQPSN, DestQPN: r.DestQPNum,
		AccessFlags: Access(r.QPAccessFlags), AH: fromDest(r.Dest), AltAH: fromDest(r.AltDest),
		Cap:       QPCap{r.MaxSendWR, r.MaxRecvWR, r.MaxSendSGE, r.MaxRecvSGE, r.MaxInlineData},
		PkeyIndex: r.PkeyIndex, AltPkeyIndex: r.AltPkeyIndex, SQDraining: r.SQDraining != 0,
		MaxRdAtomic: r.MaxRdAtomic, MaxDestRdAtomic: r.MaxDestRdAtomic, MinRNRTimer: r.MinRNRTimer,
		Port: r.PortNum, Timeout: r.Timeout, RetryCnt: r.RetryCnt, RNRRetry: r.RNRRetry,
		AltPort: r.AltPortNum, AltTimeout: r.AltTimeout}
	if rep, ok := qp.drv.(QPCapReporter); ok {
		a.Cap = rep.QueriedCap(a.Cap)
	}
	init := &QPInitAttr{Type: qp.typ, SendCQ: qp.sendCQ, RecvCQ: qp.recvCQ, SRQ: qp.srq, Cap: a.Cap, SigAll: r.SQSigAll != 0}
	if qp.ex != nil {
		init.SendOps = qp.ex.ops
	}
	return a, init, nil
}

// AttachMcast joins the (UD) QP to a multicast group: packets to gid reach its
// receive queue. mlid is the group's LID (0 on RoCE).
func (qp *QP) AttachMcast(gid GID, mlid uint16) error {
	return qp.mcast(abi.IB_USER_VERBS_CMD_ATTACH_MCAST, "attach mcast", gid, mlid)
}

// DetachMcast leaves a multicast group.
func (qp *QP) DetachMcast(gid GID, mlid uint16) error {
	return qp.mcast(abi.IB_USER_VERBS_CMD_DETACH_MCAST, "detach mcast", gid, mlid)
}

func (qp *QP) mcast(cmd uint32, op string, gid GID, mlid uint16) error {
	if err := qp.check(); err != nil {
		return opErr("", op, err)
	}
	c := qp.ctx
	if err := c.lock(&qp.object); err != nil {
		return opErr(c.dev.Name, op, err)
	}
	defer c.mu.Unlock()
	m, in := alloc[abi.AttachMcast](c)
	m.GID, m.QPHandle, m.MLID = gid, qp.handle, mlid
	return opErr(c.dev.Name, op+" "+gid.String(), c.execWrite(&sys.WriteCommand{Cmd: cmd, CoreIn: in}))
}

// PostSend posts send work requests; it returns how many were posted and,
// if not all, the error for wr[n]. It does not allocate.
func (qp *QP) PostSend(wr []SendWR) (int, error) {
	if qp.closed.Load() {
		return 0, ErrClosed
	}
	if qp.ctx.fatal.Load() {
		return 0, fatalErr(qp.ctx.dev.Name, "post send")
	}
	n, err := qp.drv.PostSend(wr)
	bound(wr, n)
	return n, err
}

// PostRecv posts receive work requests, as PostSend.
func (qp *QP) PostRecv(wr []RecvWR) (int, error) {
	if qp.closed.Load() {
		return 0, ErrClosed
	}
	if qp.ctx.fatal.Load() {
		return 0, fatalErr(qp.ctx.dev.Name, "post recv")
	}
	return qp.drv.PostRecv(wr)
}

// Close destroys the QP. The kernel refuses (EBUSY, ErrBusy) while it is
// attached to multicast groups; the QP then stays usable.
func (qp *QP) Close() error {
	if qp == nil {
		return nil
	}
	return qp.closeObject("destroy qp", qp.drv.Destroy)
}

func (qp *QP) release() { qp.drv.Destroy() }
