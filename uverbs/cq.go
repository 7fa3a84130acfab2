package uverbs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
)

// CompChannel is a completion event channel: CQs created on it report "a
// completion arrived" events (after ReqNotify) that GetEvent waits for
// without spinning, on the Go runtime poller.
type CompChannel struct {
	ctx  *Context
	file *os.File
	rc   syscall.RawConn
	id   uint64
	buf  [8]byte
}

// CreateCompChannel creates a completion channel (CREATE_COMP_CHANNEL; no
// ioctl method exists for it).
func (c *Context) CreateCompChannel() (*CompChannel, error) {
	if err := c.lock(); err != nil {
		return nil, opErr(c.dev.Name, "create comp channel", err)
	}
	defer c.mu.Unlock()
	in := c.arena.Alloc(int(unsafe.Sizeof(abi.CreateCompChannel{})))
	out := c.arena.Alloc(int(unsafe.Sizeof(abi.CreateCompChannelResp{})))
	if err := c.execWrite(&sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL, CoreIn: in, CoreOut: out}); err != nil {
		return nil, opErr(c.dev.Name, "create comp channel", err)
	}
	fd := int((*abi.CreateCompChannelResp)(unsafe.Pointer(&out[0])).FD)
	f, rc, err := pollable(fd, "comp-channel")
	if err != nil {
		return nil, opErr(c.dev.Name, "create comp channel", err)
	}
	ch := &CompChannel{ctx: c, file: f, rc: rc}
	c.nextID++
	ch.id = c.nextID
	c.live[ch.id] = ch
	return ch, nil
}

// pollable puts an event fd in non-blocking mode and hands it to the runtime
// poller.
func pollable(fd int, name string) (*os.File, syscall.RawConn, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, nil, sys.NewErrno(err.(unix.Errno))
	}
	f := os.NewFile(uintptr(fd), name)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, rc, nil
}

// FD is the channel's file descriptor (to poll it alongside other fds).
func (ch *CompChannel) FD() int { return int(ch.file.Fd()) }

// readEvent reads one fixed-size event record, waiting on the poller and
// honouring ctx's deadline and cancellation.
func readEvent(ctx context.Context, f *os.File, rc syscall.RawConn, buf []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok {
		f.SetReadDeadline(d)
	} else {
		f.SetReadDeadline(time.Time{})
	}
	// Cancellation wakes the read by moving the deadline into the past. The
	// wake-up must be over before we return: run late, it would cut short
	// the caller's next wait on this file.
	woken := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		f.SetReadDeadline(time.Unix(1, 0))
		close(woken)
	})
	defer func() {
		if !stop() {
			<-woken
		}
	}()
	var rerr error
	err := rc.Read(func(fd uintptr) bool {
		n, err := unix.Read(int(fd), buf)
		if err == unix.EAGAIN {
			return false
		}
		switch {
		case err != nil:
			rerr = sys.NewErrno(err.(unix.Errno))
		case n != len(buf):
			rerr = fmt.Errorf("short event read: %d of %d bytes", n, len(buf))
		}
		return true
	})
	if err != nil {
		if ce := ctx.Err(); ce != nil {
			return ce
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return context.DeadlineExceeded
		}
		if errors.Is(err, os.ErrClosed) {
			return ErrClosed
		}
		return err
	}
	return rerr
}

// GetEvent waits for the next completion event and returns its CQ. The CQ
// is disarmed by the event: call ReqNotify again, then poll it. Acknowledge
// events with CQ.AckEvents. Cancelling ctx (or its deadline) ends the wait
// with ctx's error.
func (ch *CompChannel) GetEvent(ctx context.Context) (*CQ, error) {
	if err := readEvent(ctx, ch.file, ch.rc, ch.buf[:]); err != nil {
		return nil, opErr(ch.ctx.dev.Name, "get cq event", err)
	}
	id := (*abi.CompEventDesc)(unsafe.Pointer(&ch.buf[0])).CQHandle
	ch.ctx.mu.Lock()
	cq, _ := ch.ctx.lookup(id).(*CQ)
	ch.ctx.mu.Unlock()
	if cq == nil {
		return nil, opErr(ch.ctx.dev.Name, "get cq event", fmt.Errorf("event for unknown CQ id %d", id))
	}
	cq.compEvents.Add(1)
	return cq, nil
}

// Close closes the channel. CQs still created on it keep the kernel's
// channel alive until they are destroyed.
func (ch *CompChannel) Close() error {
	if ch == nil {
		return nil
	}
	err := ch.file.Close()
	ch.ctx.mu.Lock()
	delete(ch.ctx.live, ch.id)
	ch.ctx.mu.Unlock()
	if err != nil && !errors.Is(err, os.ErrClosed) {
		return opErr(ch.ctx.dev.Name, "close comp channel", err)
	}
	return nil
}

// CQInitAttr describes a new CQ.
type CQInitAttr struct {
	CQE        int          // minimum number of entries
	Channel    *CompChannel // completion events go here (nil: none)
	CompVector int          // interrupt vector, < Context.NumCompVectors
}

// CQ is a completion queue.
type CQ struct {
	object
	drv        CQDriver
	cqe        int
	channel    *CompChannel
	compEvents atomic.Uint32
	acked      atomic.Uint32
}

// CQE is the queue's capacity as the kernel sized it.
func (cq *CQ) CQE() int { return cq.cqe }

// Driver returns the provider's half of the CQ.
func (cq *CQ) Driver() CQDriver { return cq.drv }

// CreateCQ creates a completion queue (CQ_CREATE ioctl, or CREATE_CQ).
func (c *Context) CreateCQ(attr CQInitAttr) (*CQ, error) {
	op := "create cq"
	if attr.CQE <= 0 {
		return nil, &Error{Op: op, Device: c.dev.Name, Err: fmt.Errorf("%w: cqe %d", sys.NewErrno(unix.EINVAL), attr.CQE)}
	}
	if attr.Channel != nil && attr.Channel.ctx != c {
		return nil, &Error{Op: op, Device: c.dev.Name, Err: fmt.Errorf("%w: the completion channel belongs to another context", sys.NewErrno(unix.EINVAL))}
	}
	drv, err := c.prov.NewCQ(&attr)
	if err != nil {
		return nil, opErr(c.dev.Name, op, err)
	}
	if err := c.lock(); err != nil {
		drv.Destroy()
		return nil, opErr(c.dev.Name, op, err)
	}
	defer c.mu.Unlock()
	dd := drv.DriverData()
	cq := &CQ{drv: drv, channel: attr.Channel}
	c.nextID++
	id := c.nextID
	var uhwOut []byte
	var handle, cqe uint32
	ran, err := c.tryIoctl(abi.UVERBS_OBJECT_CQ, abi.UVERBS_METHOD_CQ_CREATE, func() error {
		cmd := sys.NewIoctl(c.arena, abi.UVERBS_OBJECT_CQ, abi.UVERBS_METHOD_CQ_CREATE, c.dev.DriverID)
		h := cmd.NewIDR(abi.UVERBS_ATTR_CREATE_CQ_HANDLE)
		respCQE := cmd.PtrOut(abi.UVERBS_ATTR_CREATE_CQ_RESP_CQE, 4)
		cmd.U32(abi.UVERBS_ATTR_CREATE_CQ_CQE, uint32(attr.CQE))
		cmd.U64(abi.UVERBS_ATTR_CREATE_CQ_USER_HANDLE, id)
		if attr.Channel != nil {
			cmd.FD(abi.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, attr.Channel.FD())
		}
		cmd.U32(abi.UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, uint32(attr.CompVector))
		cmd.FD(abi.UVERBS_ATTR_CREATE_CQ_EVENT_FD, c.asyncFD.Int())
		if len(dd.In) > 0 {
			cmd.PtrIn(abi.UVERBS_ATTR_UHW_IN, dd.In)
		}
		if dd.OutLen > 0 {
			uhwOut = cmd.PtrOut(abi.UVERBS_ATTR_UHW_OUT, dd.OutLen)
		}
		if err := cmd.Exec(c.fd); err != nil {
			return err
		}
		handle, cqe = uint32(cmd.Data(h)), le32(respCQE)
		return nil
	})
	if !ran && err == nil {
		in := c.arena.Alloc(int(unsafe.Sizeof(abi.CreateCQ{})))
		r := (*abi.CreateCQ)(unsafe.Pointer(&in[0]))
		r.UserHandle = id
		r.CQE = uint32(attr.CQE)
		r.CompVector = uint32(attr.CompVector)
		r.CompChannel = -1
		if attr.Channel != nil {
			r.CompChannel = int32(attr.Channel.FD())
		}
		out := c.arena.Alloc(int(unsafe.Sizeof(abi.CreateCQResp{})) + dd.OutLen)
		w := &sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_CREATE_CQ, CoreIn: in, UHWIn: arenaCopy(c.arena, dd.In),
			CoreOut: out[:unsafe.Sizeof(abi.CreateCQResp{})], UHWOut: out[unsafe.Sizeof(abi.CreateCQResp{}):]}
		if err = c.execWrite(w); err == nil {
			resp := (*abi.CreateCQResp)(unsafe.Pointer(&out[0]))
			handle, cqe, uhwOut = resp.CQHandle, resp.CQE, w.UHWOut
		}
	}
	if err != nil {
		drv.Destroy()
		return nil, memlockErr(c.dev.Name, op, err)
	}
	cq.handle, cq.cqe = handle, int(cqe)
	cq.ctx, cq.kind, cq.id = c, "cq", id
	if err := drv.Created(cq, uhwOut); err != nil {
		c.destroyCQLocked(cq)
		drv.Destroy()
		return nil, opErr(c.dev.Name, op, err)
	}
	c.live[id] = cq
	return cq, nil
}

func arenaCopy(a *sys.Arena, b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	d := a.Alloc(len(b))
	copy(d, b)
	return d
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
	if n, ok := cq.drv.(cqNotifier); ok {
		return n.ReqNotify(solicitedOnly)
	}
	c := cq.ctx
	if err := c.lock(); err != nil {
		return opErr(c.dev.Name, "req notify cq", err)
	}
	defer c.mu.Unlock()
	in := c.arena.Alloc(int(unsafe.Sizeof(abi.ReqNotifyCQ{})))
	r := (*abi.ReqNotifyCQ)(unsafe.Pointer(&in[0]))
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
func (cq *CQ) Resize(cqe int) error {
	if err := cq.check(); err != nil {
		return opErr("", "resize cq", err)
	}
	c := cq.ctx
	if err := c.lock(); err != nil {
		return opErr(c.dev.Name, "resize cq", err)
	}
	defer c.mu.Unlock()
	dd := cq.drv.ResizeData(cqe)
	in := c.arena.Alloc(int(unsafe.Sizeof(abi.ResizeCQ{})))
	r := (*abi.ResizeCQ)(unsafe.Pointer(&in[0]))
	r.CQHandle = cq.handle
	r.CQE = uint32(cqe)
	out := c.arena.Alloc(int(unsafe.Sizeof(abi.ResizeCQResp{})) + dd.OutLen)
	w := &sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_RESIZE_CQ, CoreIn: in, UHWIn: arenaCopy(c.arena, dd.In),
		CoreOut: out[:unsafe.Sizeof(abi.ResizeCQResp{})], UHWOut: out[unsafe.Sizeof(abi.ResizeCQResp{}):]}
	if err := c.execWrite(w); err != nil {
		if sys.IsNotSupportedErrno(sys.ErrnoOf(err)) {
			return &Error{Op: "resize cq", Device: c.dev.Name, Err: fmt.Errorf("%w: %v", ErrNotSupported, err)}
		}
		return memlockErr(c.dev.Name, "resize cq", err)
	}
	cq.cqe = int((*abi.ResizeCQResp)(unsafe.Pointer(&out[0])).CQE)
	return opErr(c.dev.Name, "resize cq", cq.drv.Resized(cq, w.UHWOut, nil)) // compile shim for the new CQDriver contract (H1 owns this call)
}

// Close destroys the CQ. The kernel refuses (EBUSY) while QPs or SRQs use it.
func (cq *CQ) Close() error {
	if cq == nil || cq.closed.Load() {
		return nil
	}
	c := cq.ctx
	if err := c.lock(); err != nil {
		cq.closed.Store(true)
		return nil
	}
	defer c.mu.Unlock()
	if err := c.destroyCQLocked(cq); err != nil {
		return busyErr(c.dev.Name, "destroy cq", "QPs and SRQs", err)
	}
	cq.closed.Store(true)
	delete(c.live, cq.id)
	return opErr(c.dev.Name, "destroy cq", cq.drv.Destroy())
}

func (cq *CQ) release() { cq.drv.Destroy() }

func (c *Context) destroyCQLocked(cq *CQ) error {
	_, err := c.destroy(abi.UVERBS_OBJECT_CQ, abi.UVERBS_METHOD_CQ_DESTROY, abi.UVERBS_ATTR_DESTROY_CQ_HANDLE, cq.handle,
		abi.UVERBS_ATTR_DESTROY_CQ_RESP, int(unsafe.Sizeof(abi.DestroyCQResp{})),
		func() *sys.WriteCommand {
			in := c.arena.Alloc(int(unsafe.Sizeof(abi.DestroyCQ{})))
			(*abi.DestroyCQ)(unsafe.Pointer(&in[0])).CQHandle = cq.handle
			return &sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_DESTROY_CQ, CoreIn: in,
				CoreOut: c.arena.Alloc(int(unsafe.Sizeof(abi.DestroyCQResp{})))}
		})
	return err
}

func (cq *CQ) String() string { return "CQ " + strconv.Itoa(int(cq.handle)) + " on " + cq.ctx.dev.Name }

func (ch *CompChannel) release() { ch.file.Close() }
