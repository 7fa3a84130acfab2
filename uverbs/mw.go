package uverbs

import (
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
)

// MWType is a memory window's type (enum ibv_mw_type).
type MWType uint8

const (
	// MWType1 windows are bound by QP.BindMW (ibv_bind_mw) and stay bound
	// until rebound; a zero-length bind invalidates one. They are not tied
	// to a QP.
	MWType1 MWType = 1
	// MWType2 windows are bound by a WRBindMW work request, only reachable
	// through the QP that bound them, and invalidated by WRLocalInv or a
	// peer's WRSendWithInv.
	MWType2 MWType = 2
)

func (t MWType) String() string {
	switch t {
	case MWType1:
		return "type 1"
	case MWType2:
		return "type 2"
	}
	return "MWType(" + strconv.Itoa(int(t)) + ")"
}

var kindMW = &kind{name: "mw", object: abi.UVERBS_OBJECT_MW,
	destroyMethod: abi.UVERBS_METHOD_MW_DESTROY, destroyHandle: abi.UVERBS_ATTR_DESTROY_MW_HANDLE, destroyResp: -1,
	writeDestroy: func(c *Context, h uint32) *sys.WriteCommand {
		in, b := alloc[abi.DeallocMW](c)
		in.MWHandle = h
		return &sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_DEALLOC_MW, CoreIn: b}
	}}

// MW is a memory window: a remote key for a range of an MR that can be bound,
// moved and invalidated without re-registering the memory.
//
// Concurrency: every method is safe for concurrent use. RKey changes when a
// bind is posted (QP.BindMW, or a WRBindMW work request posted through
// QP.PostSend); binding one window from several goroutines at once is, as
// in rdma-core, the caller's race to order.
type MW struct {
	object
	pd   *PD
	typ  MWType
	rkey atomic.Uint32
}

// RKey is the window's current remote key: the key the next bind replaces,
// and, once that bind completed, the key peers reach the window by.
func (mw *MW) RKey() uint32 { return mw.rkey.Load() }

// Type is the window's type.
func (mw *MW) Type() MWType { return mw.typ }

// PD is the protection domain the window belongs to.
func (mw *MW) PD() *PD { return mw.pd }

// AllocMW allocates a memory window (ALLOC_MW; rdma-core ibv_alloc_mw). A
// provider without memory windows (mlx5 in ibgo) gives ErrNotSupported
// before anything is sent; a device without them gives ErrNotSupported from
// the kernel's EOPNOTSUPP.
func (pd *PD) AllocMW(typ MWType) (*MW, error) {
	const op = "alloc mw"
	if err := pd.check(); err != nil {
		return nil, opErr("", op, err)
	}
	c := pd.ctx
	if typ != MWType1 && typ != MWType2 {
		// rdma-core refuses other types before the kernel does (EINVAL).
		return nil, &Error{Op: op, Device: c.dev.Name, Err: fmt.Errorf("%w: memory window %s: only types 1 and 2 exist", sys.NewErrno(sys.EINVAL), typ)}
	}
	if mp, ok := c.prov.(MWProvider); !ok || !mp.MemoryWindows() {
		return nil, &Error{Op: op, Device: c.dev.Name, Err: fmt.Errorf("%w: the %s provider has no memory windows", ErrNotSupported, c.dev.Driver)}
	}
	if err := c.lock(&pd.object); err != nil {
		return nil, opErr(c.dev.Name, op, err)
	}
	defer c.mu.Unlock()
	mw := &MW{pd: pd, typ: typ}
	err := c.create(&mw.object, mw, &createCmd{kind: kindMW, op: op,
		// ALLOC_MW has no ioctl method in any kernel: write only.
		writeCmd: abi.IB_USER_VERBS_CMD_ALLOC_MW, writeOutLen: abi.Size[abi.AllocMWResp](),
		writeIn: func(uint64) []byte {
			r, b := alloc[abi.AllocMW](c)
			r.PDHandle, r.MWType = pd.handle, uint8(typ)
			return b
		},
		writeParse: func(out []byte) uint32 {
			r := abi.As[abi.AllocMWResp](out)
			mw.rkey.Store(r.RKey)
			return r.MWHandle
		},
		errMap: func(err error) error {
			if sys.IsNotSupportedErrno(sys.ErrnoOf(err)) {
				return &Error{Op: op, Device: c.dev.Name, Err: fmt.Errorf("%w: %v", ErrNotSupported, err)}
			}
			return opErr(c.dev.Name, op, err)
		},
	}, nil, nil)
	if err != nil {
		return nil, err
	}
	return mw, nil
}

// Close deallocates the window (DEALLOC_MW); a bound window's key stops
// working.
func (mw *MW) Close() error {
	if mw == nil {
		return nil
	}
	return mw.closeObject("dealloc mw", nil)
}

// MWProvider is implemented by a ProviderContext whose datapath carries
// memory window binds and invalidations (WRBindMW, WRLocalInv,
// WRSendWithInv). Without it AllocMW refuses with ErrNotSupported.
type MWProvider interface {
	MemoryWindows() bool
}

// MWBindInfo is what a bind gives the window (struct ibv_mw_bind_info): the
// range [Addr, Addr+Length) of MR, which must have AccessMWBind, and the
// window's remote rights. Length 0 unbinds (type 1 only).
type MWBindInfo struct {
	MR     *MR
	Addr   uint64
	Length uint64
	Access Access
}

// MWBindWR is a WRBindMW work request's window part (the bind_mw member of
// struct ibv_send_wr): the window, the key it takes (IncRKey of its current
// one, as rdma-core's callers do), and the range.
type MWBindWR struct {
	MW   *MW
	RKey uint32
	Info MWBindInfo
}

// MWBind is a type 1 bind (struct ibv_mw_bind).
type MWBind struct {
	WRID  uint64
	Flags SendFlags
	Info  MWBindInfo
}

// IncRKey returns rkey with its low 8 bits (the key part the consumer owns)
// incremented: the key a rebind gives a window (rdma-core ibv_inc_rkey).
func IncRKey(rkey uint32) uint32 {
	return rkey&0xffffff00 | (rkey+1)&0xff
}

// BindMW binds a type 1 window to a range of an MR by posting a bind work
// request on qp (rdma-core ibv_bind_mw, as providers/rxe/rxe.c:
// rxe_bind_mw builds it) and returns the window's new rkey, which mw.RKey
// also reports from now on. The bind completes on qp's send CQ (a WC with
// opcode WCBindMW if b.Flags has SendSignaled); peers may use the new key once
// it did. If that completion has an error status the window keeps its old
// binding, and the caller must not use the new key. A zero-length bind
// invalidates the window.
func (qp *QP) BindMW(mw *MW, b MWBind) (uint32, error) {
	const op = "bind mw"
	if err := qp.check(); err != nil {
		return 0, opErr("", op, err)
	}
	if err := mw.check(); err != nil {
		return 0, opErr(qp.ctx.dev.Name, op, err)
	}
	if mw.typ != MWType1 {
		return 0, &Error{Op: op, Device: qp.ctx.dev.Name, Err: fmt.Errorf("%w: %s window: type 2 windows are bound by a WRBindMW work request", sys.NewErrno(sys.EINVAL), mw.typ)}
	}
	if b.Info.Access&AccessZeroBased != 0 {
		return 0, &Error{Op: op, Device: qp.ctx.dev.Name, Err: fmt.Errorf("%w: type 1 windows cannot be zero based", sys.NewErrno(sys.EINVAL))}
	}
	if b.Info.Length != 0 && b.Info.MR == nil {
		return 0, &Error{Op: op, Device: qp.ctx.dev.Name, Err: fmt.Errorf("%w: a bind of %d bytes needs an MR", sys.NewErrno(sys.EINVAL), b.Info.Length)}
	}
	wr := [1]SendWR{{WRID: b.WRID, Opcode: WRBindMW, Flags: b.Flags,
		Bind: MWBindWR{MW: mw, RKey: IncRKey(mw.RKey()), Info: b.Info}}}
	if _, err := qp.PostSend(wr[:]); err != nil {
		return 0, opErr(qp.ctx.dev.Name, op, err)
	}
	return wr[0].Bind.RKey, nil
}

// bound records the keys of the bind work requests just posted (the first n
// of wr): the window is known by its new key from now on, as rdma-core's
// ibv_bind_mw sets mw->rkey once the bind is posted.
func bound(wr []SendWR, n int) {
	for i := 0; i < n; i++ {
		if wr[i].Opcode == WRBindMW && wr[i].Bind.MW != nil {
			wr[i].Bind.MW.rkey.Store(wr[i].Bind.RKey)
		}
	}
}
