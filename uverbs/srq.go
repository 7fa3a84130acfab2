package uverbs

import (
	"sync/atomic"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
)

// SRQInitAttr describes a new shared receive queue.
type SRQInitAttr struct {
	MaxWR  uint32
	MaxSGE uint32
	Limit  uint32 // raise SRQ_LIMIT_REACHED when fewer WRs remain (0: disarmed)
}

// SRQAttr are an SRQ's modifiable attributes (struct ibv_srq_attr).
type SRQAttr struct {
	MaxWR  uint32
	MaxSGE uint32
	Limit  uint32
}

// SRQAttrMask selects what ModifySRQ changes (enum ibv_srq_attr_mask).
type SRQAttrMask uint32

const (
	SRQAttrMaxWR SRQAttrMask = 1 << 0 // resize
	SRQAttrLimit SRQAttrMask = 1 << 1 // arm the limit event
)

// SRQ is a shared receive queue.
//
// Concurrency: every method is safe for concurrent use. PostRecv may run
// from several goroutines (the provider serialises the ring); Modify with
// SRQAttrMaxWR excludes PostRecv while the ring moves
// (SRQDriver.ModifyData/Modified).
type SRQ struct {
	object
	pd     *PD
	drv    SRQDriver
	maxWR  atomic.Uint32
	maxSGE uint32
	srqn   uint32
}

// PD returns the protection domain the SRQ was created in.
func (s *SRQ) PD() *PD { return s.pd }

// MaxWR and MaxSGE are the sizes granted: the kernel's answer, or the
// provider's own (SRQCapReporter; libmlx5's free-list length).
func (s *SRQ) MaxWR() uint32  { return s.maxWR.Load() }
func (s *SRQ) MaxSGE() uint32 { return s.maxSGE }

// SRQN is the SRQ number.
func (s *SRQ) SRQN() uint32 { return s.srqn }

// Driver returns the provider's half of the SRQ.
func (s *SRQ) Driver() SRQDriver { return s.drv }

// CreateSRQ creates a shared receive queue (SRQ_CREATE ioctl, or CREATE_SRQ).
func (pd *PD) CreateSRQ(attr SRQInitAttr) (*SRQ, error) {
	op := "create srq"
	if err := pd.check(); err != nil {
		return nil, opErr("", op, err)
	}
	c := pd.ctx
	drv, err := c.prov.NewSRQ(&attr)
	if err != nil {
		return nil, opErr(c.dev.Name, op, err)
	}
	if err := c.lock(&pd.object); err != nil {
		drv.Destroy()
		return nil, opErr(c.dev.Name, op, err)
	}
	defer c.mu.Unlock()
	s := &SRQ{pd: pd, drv: drv}
	err = c.create(&s.object, s, &createCmd{kind: kindSRQ, op: op, drv: drv.DriverData(),
		method: abi.UVERBS_METHOD_SRQ_CREATE, handleAttr: abi.UVERBS_ATTR_CREATE_SRQ_HANDLE,
		ioctl: func(cmd *sys.IoctlCmd, id uint64) func() {
			cmd.IDR(abi.UVERBS_ATTR_CREATE_SRQ_PD_HANDLE, pd.handle)
			cmd.U64(abi.UVERBS_ATTR_CREATE_SRQ_USER_HANDLE, id)
			cmd.U32(abi.UVERBS_ATTR_CREATE_SRQ_MAX_WR, attr.MaxWR)
			cmd.U32(abi.UVERBS_ATTR_CREATE_SRQ_MAX_SGE, attr.MaxSGE)
			cmd.U32(abi.UVERBS_ATTR_CREATE_SRQ_LIMIT, attr.Limit)
			cmd.Const(abi.UVERBS_ATTR_CREATE_SRQ_TYPE, 0) // IB_SRQT_BASIC
			cmd.FD(abi.UVERBS_ATTR_CREATE_SRQ_EVENT_FD, c.asyncFD.Int())
			mw := cmd.PtrOut(abi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR, 4)
			ms := cmd.PtrOut(abi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE, 4)
			sn := cmd.PtrOut(abi.UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM, 4)
			return func() { s.maxWR.Store(le32(mw)); s.maxSGE, s.srqn = le32(ms), le32(sn) }
		},
		writeCmd: abi.IB_USER_VERBS_CMD_CREATE_SRQ, writeOutLen: abi.Size[abi.CreateSRQResp](),
		writeIn: func(id uint64) []byte {
			r, b := alloc[abi.CreateSRQ](c)
			r.UserHandle, r.PDHandle, r.MaxWR, r.MaxSGE, r.SRQLimit = id, pd.handle, attr.MaxWR, attr.MaxSGE, attr.Limit
			return b
		},
		writeParse: func(out []byte) uint32 {
			r := abi.As[abi.CreateSRQResp](out)
			s.maxWR.Store(r.MaxWR)
			s.maxSGE, s.srqn = r.MaxSGE, r.SRQN
			return r.SRQHandle
		},
		errMap: func(err error) error { return memlockErr(c.dev.Name, op, err) },
	}, func(out []byte) error { return drv.Created(s, out) }, drv.Destroy)
	if err != nil {
		return nil, err
	}
	if r, ok := drv.(SRQCapReporter); ok {
		wr, sge := r.CreatedCap(s.maxWR.Load(), s.maxSGE)
		s.maxWR.Store(wr)
		s.maxSGE = sge
	}
	return s, nil
}

// Modify resizes the SRQ (SRQAttrMaxWR) or arms its limit event
// (SRQAttrLimit) (MODIFY_SRQ). The provider's Modified runs whatever the
// kernel answered, so whatever ModifyData took (rxe: the ring lock during a
// resize) is given back on every path, as rdma-core's rxe_modify_srq does.
func (s *SRQ) Modify(attr SRQAttr, mask SRQAttrMask) error {
	if err := s.check(); err != nil {
		return opErr("", "modify srq", err)
	}
	c := s.ctx
	if err := c.lock(&s.object); err != nil {
		return opErr(c.dev.Name, "modify srq", err)
	}
	defer c.mu.Unlock()
	dd := s.drv.ModifyData(&attr, mask, c.arena.Alloc)
	if dd.Refuse != nil {
		s.drv.Modified(s, &attr, mask, dd.Refuse) // releases what ModifyData took
		return opErr(c.dev.Name, "modify srq", dd.Refuse)
	}
	m, in := alloc[abi.ModifySRQ](c)
	m.SRQHandle, m.AttrMask, m.MaxWR, m.SRQLimit = s.handle, uint32(mask), attr.MaxWR, attr.Limit
	err := c.execWrite(&sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_MODIFY_SRQ, CoreIn: in, UHWIn: arenaCopy(c.arena, dd.In)})
	if err == nil && mask&SRQAttrMaxWR != 0 {
		s.maxWR.Store(attr.MaxWR)
	}
	derr := s.drv.Modified(s, &attr, mask, err)
	if err != nil {
		return memlockErr(c.dev.Name, "modify srq", err)
	}
	return opErr(c.dev.Name, "modify srq", derr)
}

// Query reports the SRQ's attributes (QUERY_SRQ).
func (s *SRQ) Query() (SRQAttr, error) {
	if err := s.check(); err != nil {
		return SRQAttr{}, opErr("", "query srq", err)
	}
	c := s.ctx
	if err := c.lock(&s.object); err != nil {
		return SRQAttr{}, opErr(c.dev.Name, "query srq", err)
	}
	defer c.mu.Unlock()
	q, in := alloc[abi.QuerySRQ](c)
	q.SRQHandle = s.handle
	out := c.arena.Alloc(abi.Size[abi.QuerySRQResp]())
	if err := c.execWrite(&sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_QUERY_SRQ, CoreIn: in, CoreOut: out}); err != nil {
		return SRQAttr{}, opErr(c.dev.Name, "query srq", err)
	}
	r := abi.As[abi.QuerySRQResp](out)
	return SRQAttr{MaxWR: r.MaxWR, MaxSGE: r.MaxSGE, Limit: r.SRQLimit}, nil
}

// PostRecv posts receive work requests to the SRQ.
func (s *SRQ) PostRecv(wr []RecvWR) (int, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	if s.ctx.fatal.Load() {
		return 0, fatalErr(s.ctx.dev.Name, "post srq recv")
	}
	return s.drv.PostRecv(wr)
}

// Close destroys the SRQ; the kernel refuses (EBUSY, ErrBusy) while QPs use
// it, and the SRQ then stays usable.
func (s *SRQ) Close() error {
	if s == nil {
		return nil
	}
	return s.closeObject("destroy srq", s.drv.Destroy)
}

func (s *SRQ) release() { s.drv.Destroy() }
