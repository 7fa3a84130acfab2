package uverbs

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
)

// CompChannel is a completion event channel: CQs created on it report "a
// completion arrived" events (after ReqNotify) that GetEvent waits for
// without spinning, on the Go runtime poller.
//
// Concurrency: every method is safe for concurrent use. Concurrent GetEvent
// calls each receive a different event (each reads into its own buffer);
// Close ends every waiting GetEvent with ErrClosed.
type CompChannel struct {
	object
	fd *sys.PollFD
}

// CreateCompChannel creates a completion channel (CREATE_COMP_CHANNEL; no
// ioctl method exists for it).
func (c *Context) CreateCompChannel() (*CompChannel, error) {
	if err := c.lock(); err != nil {
		return nil, opErr(c.dev.Name, "create comp channel", err)
	}
	defer c.mu.Unlock()
	ch := &CompChannel{}
	var raw int
	err := c.create(&ch.object, ch, &createCmd{kind: kindCompChannel, op: "create comp channel",
		writeCmd: abi.IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL, writeOutLen: abi.Size[abi.CreateCompChannelResp](),
		writeIn: func(uint64) []byte {
			_, b := alloc[abi.CreateCompChannel](c)
			return b
		},
		writeParse: func(out []byte) uint32 {
			raw = int(abi.As[abi.CreateCompChannelResp](out).FD)
			return 0
		},
	}, func([]byte) error {
		var err error
		ch.fd, err = sys.NewPollFD(sys.NewFD(raw), "comp-channel")
		return err
	}, nil)
	if err != nil {
		return nil, err
	}
	return ch, nil
}

// FD is the channel's file descriptor (to poll it alongside other fds), -1
// after Close.
func (ch *CompChannel) FD() int { return ch.fd.Int() }

// GetEvent waits for the next completion event and returns its CQ. The CQ
// is disarmed by the event: call ReqNotify again, then poll it. Acknowledge
// events with CQ.AckEvents. Cancelling ctx (or its deadline) ends the wait
// with ctx's error.
func (ch *CompChannel) GetEvent(ctx context.Context) (*CQ, error) {
	if err := ch.check(); err != nil {
		return nil, opErr("", "get cq event", err)
	}
	// Per call (concurrent callers never share it), and aligned for its
	// fields, which abi.As over a byte array would not be.
	var desc abi.CompEventDesc
	c := ch.ctx
	if c.fatal.Load() {
		return nil, fatalErr(c.dev.Name, "get cq event")
	}
	// A removed device completes nothing more: its removal ends the wait.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.goneCtx(), cancel)
	defer stop()
	if _, err := ch.fd.Read(rctx, abi.Bytes(&desc)); err != nil {
		if c.fatal.Load() && ctx.Err() == nil {
			return nil, fatalErr(c.dev.Name, "get cq event")
		}
		return nil, opErr(c.dev.Name, "get cq event", eventErr(err))
	}
	id := desc.CQHandle
	ch.ctx.mu.Lock()
	cq, _ := ch.ctx.lookup(id).(*CQ)
	ch.ctx.mu.Unlock()
	if cq == nil {
		return nil, opErr(ch.ctx.dev.Name, "get cq event", fmt.Errorf("event for unknown CQ id %d", id))
	}
	cq.compEvents.Add(1)
	if e, ok := cq.drv.(cqEventHook); ok {
		// the provider's cq_event (libibverbs' ibv_get_cq_event calls
		// it): mlx5 advances the arm sequence number, without which the
		// HCA ignores the re-arms after the first event
		e.Event()
	}
	return cq, nil
}

// cqEventHook is implemented by a provider's CQ that must see each
// completion event read for it (rdma-core's cq_event op).
type cqEventHook interface{ Event() }

// eventErr maps the poller's "closed" to ErrClosed.
func eventErr(err error) error {
	if err == sys.ErrFDClosed {
		return ErrClosed
	}
	return err
}

// Close closes the channel. CQs still created on it keep the kernel's
// channel alive until they are destroyed.
func (ch *CompChannel) Close() error {
	if ch == nil {
		return nil
	}
	return ch.closeObject("close comp channel", ch.fd.Close)
}

func (ch *CompChannel) release() { ch.fd.Close() }

// CQInitAttr describes a new CQ.
type CQInitAttr struct {
	CQE        int          // minimum number of entries
	Channel    *CompChannel // completion events go here (nil: none)
	CompVector int          // interrupt vector, < Context.NumCompVectors
	// Timestamps asks for the HCA's completion time in WC.Timestamp
	// (rdma-core ibv_create_cq_ex with IBV_WC_EX_WITH_COMPLETION_TIMESTAMP:
	// IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION). A device without it refuses
	// the CQ (rxe: EOPNOTSUPP, which matches ErrNotSupported);
	// Context.CompletionClock tells beforehand, and converts the stamps to
	// wall-clock time.
	Timestamps bool
	// WallClock asks for completion timestamps the device writes in
	// wall-clock form (rdma-core: IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK
	// on an mlx5 context with MLX5DV_CONTEXT_FLAGS_REAL_TIME_TS, which sends
	// MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS): ConnectX-6 Dx and later with
	// the real-time clock enabled. CQ.CompletionClock converts the stamps.
	// A provider or device without it refuses the CQ with ErrNotSupported
	// before any command; Context.WallClockCompletionClock tells
	// beforehand. It excludes Timestamps (one format per CQ).
	WallClock bool
	// WCFlags are the completion fields the program reads through the
	// extended poll (StartPoll and the Read* getters), as ibv_create_cq_ex's
	// wc_flags. WCExCompletionTimestamp implies Timestamps;
	// WCExCompletionTimestampWallclock implies WallClock where the device
	// has it and WCExCompletionTimestamp is not asked for, else Timestamps
	// with the context's CompletionClock (as libmlx5 chooses), and
	// ErrNotSupported without either. Flags ibgo's WC cannot carry (CVLAN,
	// flow tag, TM info) are refused with ErrNotSupported.
	WCFlags WCExFlags
}

// CQ is a completion queue.
//
// Concurrency: every method is safe for concurrent use, with one exception
// inherited from the providers (and rdma-core): Poll must not be called from
// two goroutines at once on providers that keep the consumer index unlocked
// (rxe locks; see the provider's documentation). Resize excludes Poll for
// the duration of the resize command (CQDriver.ResizeData/Resized), and
// Close makes later Polls return ErrClosed. The extended poll (StartPoll ..
// EndPoll and the Read* getters) keeps its current completion in the CQ, so
// it and Poll are used by one goroutine at a time, as in rdma-core.
type CQ struct {
	object
	drv        CQDriver
	cqe        atomic.Int32
	channel    *CompChannel
	compEvents atomic.Uint32
	acked      atomic.Uint32
	wcFlags    WCExFlags
	stamps     bool            // created with free-running completion timestamps (Timestamps)
	wall       CompletionClock // created with wall-clock timestamps (WallClock): their converter
	wcClock    CompletionClock // WCExCompletionTimestampWallclock: ReadCompletionWallclockNS's converter
	poll       cqPoll          // the extended poll's current completion
}

// WCFlags are the completion fields the CQ was created for (CQInitAttr.WCFlags).
func (cq *CQ) WCFlags() WCExFlags { return cq.wcFlags }

// CQE is the queue's capacity as the kernel sized it.
func (cq *CQ) CQE() int { return int(cq.cqe.Load()) }

// Driver returns the provider's half of the CQ.
func (cq *CQ) Driver() CQDriver { return cq.drv }

// maxCQE bounds a CQ's entries: the commands carry a u32, the kernel takes
// it as an int (ib_uverbs_create_cq: attr.cqe) and CQ.CQE keeps an int32.
const maxCQE = math.MaxInt32

func checkCQE(cqe int) error {
	if cqe <= 0 || cqe > maxCQE {
		return fmt.Errorf("%w: cqe %d is outside 1..%d", sys.NewErrno(sys.EINVAL), cqe, maxCQE)
	}
	return nil
}

// CreateCQ creates a completion queue (CQ_CREATE ioctl, or CREATE_CQ).
func (c *Context) CreateCQ(attr CQInitAttr) (*CQ, error) {
	op := "create cq"
	if err := checkCQE(attr.CQE); err != nil {
		return nil, &Error{Op: op, Device: c.dev.Name, Err: err}
	}
	if err := checkWCFlags(&attr); err != nil {
		return nil, &Error{Op: op, Device: c.dev.Name, Err: err}
	}
	if attr.WCFlags&WCExCompletionTimestamp != 0 {
		attr.Timestamps = true
	}
	if attr.WallClock && attr.Timestamps {
		return nil, &Error{Op: op, Device: c.dev.Name, Err: fmt.Errorf("%w: a CQ's completion timestamps are free-running (Timestamps) or wall-clock (WallClock), not both", sys.NewErrno(sys.EINVAL))}
	}
	wcClock, err := c.wallclockWCFlag(&attr)
	if err != nil {
		return nil, &Error{Op: op, Device: c.dev.Name, Err: err}
	}
	var wall CompletionClock
	if attr.WallClock {
		// Refused here, before the provider or the kernel sees the CQ.
		clk, err := c.wallClock()
		if err != nil {
			return nil, &Error{Op: op, Device: c.dev.Name, Err: err}
		}
		wall = clk
	}
	if attr.Channel != nil && attr.Channel.ctx != c {
		return nil, &Error{Op: op, Device: c.dev.Name, Err: fmt.Errorf("%w: the completion channel belongs to another context", sys.NewErrno(sys.EINVAL))}
	}
	drv, err := c.prov.NewCQ(&attr)
	if err != nil {
		return nil, opErr(c.dev.Name, op, err)
	}
	var chObj *object
	if attr.Channel != nil {
		chObj = &attr.Channel.object
	}
	if err := c.lock(chObj); err != nil {
		drv.Destroy()
		return nil, opErr(c.dev.Name, op, err)
	}
	defer c.mu.Unlock()
	cq := &CQ{drv: drv, channel: attr.Channel, wcFlags: attr.WCFlags, stamps: attr.Timestamps, wall: wall, wcClock: wcClock}
	channelFD := int32(-1)
	if attr.Channel != nil {
		channelFD = int32(attr.Channel.FD())
	}
	var flags uint32
	if attr.Timestamps || attr.WallClock {
		// rdma-core libibverbs/cmd_cq.c: ibv_cmd_create_cq_ex sets it for
		// both timestamp wc_flags; the provider's driver data says which
		// format (mlx5_ib qp.c: get_ts_format checks the real-time flag
		// first).
		flags |= abi.IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION
	}
	writeCmd, writeOutLen := uint32(abi.IB_USER_VERBS_CMD_CREATE_CQ), abi.Size[abi.CreateCQResp]()
	if flags != 0 {
		// Only the extended command carries flags (rdma-core
		// libibverbs/cmd_cq.c: ibv_cmd_create_cq_ex).
		writeCmd, writeOutLen = abi.IB_USER_VERBS_EX_CMD_CREATE_CQ, abi.Size[abi.ExCreateCQResp]()
	}
	err = c.create(&cq.object, cq, &createCmd{kind: kindCQ, op: op, drv: drv.DriverData(),
		method: abi.UVERBS_METHOD_CQ_CREATE, handleAttr: abi.UVERBS_ATTR_CREATE_CQ_HANDLE,
		ioctl: func(cmd *sys.IoctlCmd, id uint64) func() {
			respCQE := cmd.PtrOut(abi.UVERBS_ATTR_CREATE_CQ_RESP_CQE, 4)
			cmd.U32(abi.UVERBS_ATTR_CREATE_CQ_CQE, uint32(attr.CQE))
			cmd.U64(abi.UVERBS_ATTR_CREATE_CQ_USER_HANDLE, id)
			if channelFD >= 0 {
				cmd.FD(abi.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, int(channelFD))
			}
			cmd.U32(abi.UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, uint32(attr.CompVector))
			cmd.FD(abi.UVERBS_ATTR_CREATE_CQ_EVENT_FD, c.asyncFD.Int())
			if flags != 0 {
				cmd.U64(abi.UVERBS_ATTR_CREATE_CQ_FLAGS, uint64(flags)) // a FLAGS_IN attribute: 8 bytes preferred
			}
			return func() { cq.cqe.Store(int32(le32(respCQE))) }
		},
		writeCmd: writeCmd, writeEx: flags != 0, writeOutLen: writeOutLen,
		writeIn: func(id uint64) []byte {
			if flags != 0 {
				r, b := alloc[abi.ExCreateCQ](c)
				r.UserHandle, r.CQE, r.CompVector, r.CompChannel, r.Flags = id, uint32(attr.CQE), uint32(attr.CompVector), channelFD, flags
				return b
			}
			r, b := alloc[abi.CreateCQ](c)
			r.UserHandle, r.CQE, r.CompVector, r.CompChannel = id, uint32(attr.CQE), uint32(attr.CompVector), channelFD
			return b
		},
		writeParse: func(out []byte) uint32 {
			r := abi.As[abi.CreateCQResp](out)
			cq.cqe.Store(int32(r.CQE))
			return r.CQHandle
		},
		errMap: func(err error) error { return memlockErr(c.dev.Name, op, err) },
	}, func(out []byte) error { return drv.Created(cq, out) }, drv.Destroy)
	if err != nil {
		return nil, err
	}
	return cq, nil
}

// Poll fills wc with up to len(wc) completions and returns how many. It does
// not allocate and makes no system call on providers with a user-space
// datapath.
func (cq *CQ) Poll(wc []WC) (int, error) {
	if cq.closed.Load() {
		return 0, ErrClosed
	}
	return cq.drv.Poll(wc)
}

// cqNotifier is implemented by providers that arm CQs in user space (mlx5).
type cqNotifier interface {
	ReqNotify(solicitedOnly bool) error
}

// ReqNotify arms the CQ: the next completion (or the next solicited one)
// raises an event on its channel.
func (cq *CQ) ReqNotify(solicitedOnly bool) error {
	if err := cq.check(); err != nil {
		return opErr("", "req notify cq", err)
	}
	if cq.ctx.fatal.Load() {
		return fatalErr(cq.ctx.dev.Name, "req notify cq")
	}
	if n, ok := cq.drv.(cqNotifier); ok {
		return n.ReqNotify(solicitedOnly)
	}
	c := cq.ctx
	if err := c.lock(&cq.object); err != nil {
		return opErr(c.dev.Name, "req notify cq", err)
	}
	defer c.mu.Unlock()
	r, in := alloc[abi.ReqNotifyCQ](c)
	r.CQHandle = cq.handle
	if solicitedOnly {
		r.SolicitedOnly = 1
	}
	return opErr(c.dev.Name, "req notify cq", c.execWrite(&sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, CoreIn: in}))
}

// AckEvents acknowledges n completion events taken from GetEvent. (The
// kernel keeps no state for this; the count is bookkeeping, as in rdma-core,
// so Close can report unacknowledged events.)
func (cq *CQ) AckEvents(n int) { cq.acked.Add(uint32(n)) }

// Events returns how many completion events were delivered and acknowledged.
func (cq *CQ) Events() (delivered, acked int) {
	return int(cq.compEvents.Load()), int(cq.acked.Load())
}

// Resize changes the number of entries (RESIZE_CQ); completions already in
// the queue are kept. Devices that cannot resize give ErrNotSupported.
//
// The kernel copies pending completions into the new ring and rewrites the
// consumer index, so Poll must not run meanwhile: the provider excludes it
// from ResizeData until Resized, which runs whatever the command's outcome
// (mirrors rdma-core providers/rxe/rxe.c: rxe_resize_cq, which holds the CQ
// lock across ibv_cmd_resize_cq).
func (cq *CQ) Resize(cqe int) error {
	if err := cq.check(); err != nil {
		return opErr("", "resize cq", err)
	}
	c := cq.ctx
	if err := c.lock(&cq.object); err != nil {
		return opErr(c.dev.Name, "resize cq", err)
	}
	defer c.mu.Unlock()
	if err := checkCQE(cqe); err != nil {
		return &Error{Op: "resize cq", Device: c.dev.Name, Err: err}
	}
	dd := cq.drv.ResizeData(cqe) // from here Poll waits
	if dd.Refuse != nil {
		cq.drv.Resized(cq, nil, dd.Refuse) // ends the exclusion; its error is Refuse
		return opErr(c.dev.Name, "resize cq", dd.Refuse)
	}
	r, in := alloc[abi.ResizeCQ](c)
	r.CQHandle, r.CQE = cq.handle, uint32(cqe)
	n := abi.Size[abi.ResizeCQResp]()
	out := c.arena.Alloc(n + dd.OutLen)
	w := &sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_RESIZE_CQ, CoreIn: in, UHWIn: arenaCopy(c.arena, dd.In),
		CoreOut: out[:n], UHWOut: out[n:]}
	err := c.execWrite(w)
	if err == nil {
		cq.cqe.Store(int32(abi.As[abi.ResizeCQResp](out).CQE))
	}
	derr := cq.drv.Resized(cq, w.UHWOut, err) // always: it ends the exclusion
	switch {
	case err != nil && sys.IsNotSupportedErrno(sys.ErrnoOf(err)):
		return &Error{Op: "resize cq", Device: c.dev.Name, Err: fmt.Errorf("%w: %v", ErrNotSupported, err)}
	case err != nil:
		return memlockErr(c.dev.Name, "resize cq", err)
	}
	return opErr(c.dev.Name, "resize cq", derr)
}

// Close destroys the CQ. The kernel refuses (EBUSY, ErrBusy) while QPs or
// SRQs use it; the CQ then stays usable.
func (cq *CQ) Close() error {
	if cq == nil {
		return nil
	}
	return cq.closeObject("destroy cq", cq.drv.Destroy)
}

func (cq *CQ) release() { cq.drv.Destroy() }

func (cq *CQ) String() string { return "CQ " + strconv.Itoa(int(cq.handle)) + " on " + cq.ctx.dev.Name }
