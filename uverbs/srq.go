package uverbs

import (
	"unsafe"

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
type SRQ struct {
	object
	pd     *PD
	drv    SRQDriver
	maxWR  uint32
	maxSGE uint32
	srqn   uint32
}

// MaxWR and MaxSGE are the sizes the kernel granted.
func (s *SRQ) MaxWR() uint32  { return s.maxWR }
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
	if err := c.lock(); err != nil {
		drv.Destroy()
		return nil, opErr(c.dev.Name, op, err)
	}
	defer c.mu.Unlock()
	dd := drv.DriverData()
	c.nextID++
	id := c.nextID
	s := &SRQ{pd: pd, drv: drv}
	var uhwOut []byte
	ran, err := c.tryIoctl(abi.UVERBS_OBJECT_SRQ, abi.UVERBS_METHOD_SRQ_CREATE, func() error {
		cmd := sys.NewIoctl(c.arena, abi.UVERBS_OBJECT_SRQ, abi.UVERBS_METHOD_SRQ_CREATE, c.dev.DriverID)
		h := cmd.NewIDR(abi.UVERBS_ATTR_CREATE_SRQ_HANDLE)
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
		if len(dd.In) > 0 {
			cmd.PtrIn(abi.UVERBS_ATTR_UHW_IN, dd.In)
		}
		if dd.OutLen > 0 {
			uhwOut = cmd.PtrOut(abi.UVERBS_ATTR_UHW_OUT, dd.OutLen)
		}
		if err := cmd.Exec(c.fd); err != nil {
			return err
		}
		s.handle, s.maxWR, s.maxSGE, s.srqn = uint32(cmd.Data(h)), le32(mw), le32(ms), le32(sn)
		return nil
	})
	if !ran && err == nil {
		in := c.arena.Alloc(int(unsafe.Sizeof(abi.CreateSRQ{})))
		r := (*abi.CreateSRQ)(unsafe.Pointer(&in[0]))
		r.UserHandle, r.PDHandle, r.MaxWR, r.MaxSGE, r.SRQLimit = id, pd.handle, attr.MaxWR, attr.MaxSGE, attr.Limit
		out := c.arena.Alloc(int(unsafe.Sizeof(abi.CreateSRQResp{})) + dd.OutLen)
		w := &sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_CREATE_SRQ, CoreIn: in, UHWIn: arenaCopy(c.arena, dd.In),
			CoreOut: out[:unsafe.Sizeof(abi.CreateSRQResp{})], UHWOut: out[unsafe.Sizeof(abi.CreateSRQResp{}):]}
		if err = c.execWrite(w); err == nil {
			resp := (*abi.CreateSRQResp)(unsafe.Pointer(&out[0]))
			s.handle, s.maxWR, s.maxSGE, s.srqn, uhwOut = resp.SRQHandle, resp.MaxWR, resp.MaxSGE, resp.SRQN, w.UHWOut
		}
	}
	if err != nil {
		drv.Destroy()
		return nil, memlockErr(c.dev.Name, op, err)
	}
	s.ctx, s.kind, s.id = c, "srq", id
	if err := drv.Created(s, uhwOut); err != nil {
		c.destroySRQLocked(s)
		drv.Destroy()
		return nil, opErr(c.dev.Name, op, err)
	}
	c.live[id] = s
	return s, nil
}

// Modify resizes the SRQ (SRQAttrMaxWR) or arms its limit event
// (SRQAttrLimit) (MODIFY_SRQ).
func (s *SRQ) Modify(attr SRQAttr, mask SRQAttrMask) error {
	if err := s.check(); err != nil {
		return opErr("", "modify srq", err)
	}
	c := s.ctx
	if err := c.lock(); err != nil {
		return opErr(c.dev.Name, "modify srq", err)
	}
	defer c.mu.Unlock()
	dd := s.drv.ModifyData(&attr, mask, c.arena.Alloc)
	in := c.arena.Alloc(int(unsafe.Sizeof(abi.ModifySRQ{})))
	m := (*abi.ModifySRQ)(unsafe.Pointer(&in[0]))
	m.SRQHandle, m.AttrMask, m.MaxWR, m.SRQLimit = s.handle, uint32(mask), attr.MaxWR, attr.Limit
	if err := c.execWrite(&sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_MODIFY_SRQ, CoreIn: in, UHWIn: arenaCopy(c.arena, dd.In)}); err != nil {
		return memlockErr(c.dev.Name, "modify srq", err)
	}
	if mask&SRQAttrMaxWR != 0 {
		s.maxWR = attr.MaxWR
	}
	return opErr(c.dev.Name, "modify srq", s.drv.Modified(s, &attr, mask, nil)) // compile shim for the new SRQDriver contract (H1 owns this call)
}

// Query reports the SRQ's attributes (QUERY_SRQ).
func (s *SRQ) Query() (SRQAttr, error) {
	if err := s.check(); err != nil {
		return SRQAttr{}, opErr("", "query srq", err)
	}
	c := s.ctx
	if err := c.lock(); err != nil {
		return SRQAttr{}, opErr(c.dev.Name, "query srq", err)
	}
	defer c.mu.Unlock()
	in := c.arena.Alloc(int(unsafe.Sizeof(abi.QuerySRQ{})))
	(*abi.QuerySRQ)(unsafe.Pointer(&in[0])).SRQHandle = s.handle
	out := c.arena.Alloc(int(unsafe.Sizeof(abi.QuerySRQResp{})))
	if err := c.execWrite(&sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_QUERY_SRQ, CoreIn: in, CoreOut: out}); err != nil {
		return SRQAttr{}, opErr(c.dev.Name, "query srq", err)
	}
	r := (*abi.QuerySRQResp)(unsafe.Pointer(&out[0]))
	return SRQAttr{MaxWR: r.MaxWR, MaxSGE: r.MaxSGE, Limit: r.SRQLimit}, nil
}

// PostRecv posts receive work requests to the SRQ.
func (s *SRQ) PostRecv(wr []RecvWR) (int, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	return s.drv.PostRecv(wr)
}

// Close destroys the SRQ; the kernel refuses (EBUSY) while QPs use it.
func (s *SRQ) Close() error {
	if s == nil || s.closed.Load() {
		return nil
	}
	c := s.ctx
	if err := c.lock(); err != nil {
		s.closed.Store(true)
		return nil
	}
	defer c.mu.Unlock()
	if err := c.destroySRQLocked(s); err != nil {
		return busyErr(c.dev.Name, "destroy srq", "QPs", err)
	}
	s.closed.Store(true)
	delete(c.live, s.id)
	return opErr(c.dev.Name, "destroy srq", s.drv.Destroy())
}

func (s *SRQ) release() { s.drv.Destroy() }

func (c *Context) destroySRQLocked(s *SRQ) error {
	_, err := c.destroy(abi.UVERBS_OBJECT_SRQ, abi.UVERBS_METHOD_SRQ_DESTROY, abi.UVERBS_ATTR_DESTROY_SRQ_HANDLE, s.handle,
		abi.UVERBS_ATTR_DESTROY_SRQ_RESP, int(unsafe.Sizeof(abi.DestroySRQResp{})),
		func() *sys.WriteCommand {
			in := c.arena.Alloc(int(unsafe.Sizeof(abi.DestroySRQ{})))
			(*abi.DestroySRQ)(unsafe.Pointer(&in[0])).SRQHandle = s.handle
			return &sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_DESTROY_SRQ, CoreIn: in,
				CoreOut: c.arena.Alloc(int(unsafe.Sizeof(abi.DestroySRQResp{})))}
		})
	return err
}
