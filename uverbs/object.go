package uverbs

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
)

// object is what every verbs object shares: its context, kind, kernel handle
// and closed state. The registry key (ID) is also the user_handle the kernel
// echoes in events, so an event finds its Go object without a pointer ever
// crossing the kernel boundary.
type object struct {
	ctx    *Context
	kind   *kind
	id     uint64 // registry key and user_handle
	handle uint32
	closed atomic.Bool // set under ctx.mu; read without it on the datapath
}

// releaser is implemented by objects that hold provider state (mappings) to
// drop when their context closes underneath them.
type releaser interface{ release() }

func (o *object) check() error {
	if o == nil || o.closed.Load() {
		return ErrClosed
	}
	return nil
}

// Handle is the kernel's handle for the object (per uverbs file).
func (o *object) Handle() uint32 { return o.handle }

// Context returns the context the object was created on.
func (o *object) Context() *Context { return o.ctx }

func (o *object) base() *object { return o }

func (o *object) String() string {
	return fmt.Sprintf("%s %d on %s", strings.ToUpper(o.kind.name), o.handle, o.ctx.dev.Name)
}

// kind describes one kernel object type once: its name, and how the kernel
// destroys it (the ioctl method and, for kernels without it, the legacy
// write command).
type kind struct {
	name     string // "cq": registry and LiveObjects key
	children string // what must be closed first when the kernel says EBUSY
	object   uint16 // UVERBS_OBJECT_*
	// destroy: the ioctl method, its handle attribute and optional response.
	destroyMethod, destroyHandle uint16
	destroyResp                  int // PTR_OUT attribute id, -1: none
	destroyRespLen               int
	// writeDestroy builds the legacy destroy command for handle.
	writeDestroy func(c *Context, handle uint32) *sys.WriteCommand
}

var (
	kindPD = &kind{name: "pd", children: "MRs, MWs, QPs, SRQs and AHs", object: abi.UVERBS_OBJECT_PD,
		destroyMethod: abi.UVERBS_METHOD_PD_DESTROY, destroyHandle: abi.UVERBS_ATTR_DESTROY_PD_HANDLE, destroyResp: -1,
		writeDestroy: func(c *Context, h uint32) *sys.WriteCommand {
			in, b := alloc[abi.DeallocPD](c)
			in.PDHandle = h
			return &sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_DEALLOC_PD, CoreIn: b}
		}}
	kindMR = &kind{name: "mr", children: "memory windows", object: abi.UVERBS_OBJECT_MR,
		destroyMethod: abi.UVERBS_METHOD_MR_DESTROY, destroyHandle: abi.UVERBS_ATTR_DESTROY_MR_HANDLE, destroyResp: -1,
		writeDestroy: func(c *Context, h uint32) *sys.WriteCommand {
			in, b := alloc[abi.DeregMR](c)
			in.MRHandle = h
			return &sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_DEREG_MR, CoreIn: b}
		}}
	kindCQ = &kind{name: "cq", children: "QPs and SRQs", object: abi.UVERBS_OBJECT_CQ,
		destroyMethod: abi.UVERBS_METHOD_CQ_DESTROY, destroyHandle: abi.UVERBS_ATTR_DESTROY_CQ_HANDLE,
		destroyResp: abi.UVERBS_ATTR_DESTROY_CQ_RESP, destroyRespLen: abi.Size[abi.DestroyCQResp](),
		writeDestroy: func(c *Context, h uint32) *sys.WriteCommand {
			in, b := alloc[abi.DestroyCQ](c)
			in.CQHandle = h
			return &sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_DESTROY_CQ, CoreIn: b,
				CoreOut: c.arena.Alloc(abi.Size[abi.DestroyCQResp]())}
		}}
	kindQP = &kind{name: "qp", children: "multicast attachments", object: abi.UVERBS_OBJECT_QP,
		destroyMethod: abi.UVERBS_METHOD_QP_DESTROY, destroyHandle: abi.UVERBS_ATTR_DESTROY_QP_HANDLE,
		destroyResp: abi.UVERBS_ATTR_DESTROY_QP_RESP, destroyRespLen: abi.Size[abi.DestroyQPResp](),
		writeDestroy: func(c *Context, h uint32) *sys.WriteCommand {
			in, b := alloc[abi.DestroyQP](c)
			in.QPHandle = h
			return &sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_DESTROY_QP, CoreIn: b,
				CoreOut: c.arena.Alloc(abi.Size[abi.DestroyQPResp]())}
		}}
	kindSRQ = &kind{name: "srq", children: "QPs", object: abi.UVERBS_OBJECT_SRQ,
		destroyMethod: abi.UVERBS_METHOD_SRQ_DESTROY, destroyHandle: abi.UVERBS_ATTR_DESTROY_SRQ_HANDLE,
		destroyResp: abi.UVERBS_ATTR_DESTROY_SRQ_RESP, destroyRespLen: abi.Size[abi.DestroySRQResp](),
		writeDestroy: func(c *Context, h uint32) *sys.WriteCommand {
			in, b := alloc[abi.DestroySRQ](c)
			in.SRQHandle = h
			return &sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_DESTROY_SRQ, CoreIn: b,
				CoreOut: c.arena.Alloc(abi.Size[abi.DestroySRQResp]())}
		}}
	kindAH = &kind{name: "ah", object: abi.UVERBS_OBJECT_AH,
		destroyMethod: abi.UVERBS_METHOD_AH_DESTROY, destroyHandle: abi.UVERBS_ATTR_DESTROY_AH_HANDLE, destroyResp: -1,
		writeDestroy: func(c *Context, h uint32) *sys.WriteCommand {
			in, b := alloc[abi.DestroyAH](c)
			in.AHHandle = h
			return &sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_DESTROY_AH, CoreIn: b}
		}}
	// A completion channel is a file, not an object with a handle: closing
	// its descriptor is its destroy.
	kindCompChannel = &kind{name: "comp_channel"}
)

// alloc returns a zeroed T in the command arena and its bytes. Callers hold
// c.mu. The arena is sized for the largest command, so running out is a
// programming error (abi.As panics saying so).
func alloc[T any](c *Context) (*T, []byte) {
	b := c.arena.Alloc(abi.Size[T]())
	return abi.As[T](b), b
}

// createCmd is one create command, described once: its ioctl form (ioctl
// nil: the object has none), its legacy write form, and how each response is
// read back. The pipeline (Context.create) does the rest.
type createCmd struct {
	kind   *kind
	op     string // "create cq"
	method uint16 // ioctl create method (0 is a valid method id)
	// handleAttr is the ioctl attribute that returns the new handle.
	handleAttr uint16
	// ioctl adds the core attributes for user handle id and returns what
	// reads the results once the kernel answered; nil when the object has
	// no ioctl create method.
	ioctl func(cmd *sys.IoctlCmd, id uint64) (parse func())
	// writeCmd is the legacy command number; writeIn fills its core
	// request for user handle id (nil: there is no legacy form);
	// writeParse reads the core response (of writeOutLen bytes) and
	// returns the handle.
	writeCmd    uint32
	writeEx     bool // writeCmd is an IB_USER_VERBS_EX_CMD_* (no response field in writeIn)
	writeIn     func(id uint64) []byte
	writeOutLen int
	writeParse  func(out []byte) (handle uint32)
	// drv is the provider's request and response size (zero: none).
	drv DriverData
	// errMap turns a command error into the caller's error (nil: opErr).
	errMap func(err error) error
}

// create runs the one create pipeline: it reserves the user handle, sends c
// through the ioctl method (unless the kernel refused that method before on
// this context) or the legacy write command, hands the driver response to
// created (the provider's hook), and registers o. On any failure nothing is
// left behind: a kernel object already made is destroyed, and drvDestroy
// (when not nil) releases the provider's half. Callers hold c.mu. When a
// compensating destroy fails too, its error is joined into the one returned:
// the kernel object (or provider state) may then be left behind, and the
// caller must learn so.
func (c *Context) create(o *object, self any, cmd *createCmd, created func(uhwOut []byte) error, drvDestroy func() error) error {
	fail := func(err error) error {
		if drvDestroy != nil {
			if derr := drvDestroy(); derr != nil {
				err = errors.Join(err, fmt.Errorf("releasing the provider's half: %w", derr))
			}
		}
		return err
	}
	id := c.nextID + 1
	uhwOut, err := c.runCreate(o, cmd, id)
	if err != nil {
		if cmd.errMap != nil {
			return fail(cmd.errMap(err))
		}
		return fail(opErr(c.dev.Name, cmd.op, err))
	}
	c.nextID = id
	o.ctx, o.kind, o.id = c, cmd.kind, id
	if created != nil {
		if err := created(uhwOut); err != nil {
			err = opErr(c.dev.Name, cmd.op, err)
			c.arena.Reset()
			if derr := c.destroyLocked(o); derr != nil {
				err = errors.Join(err, fmt.Errorf("destroying the kernel object again (handle %d): %w", o.handle, opErr(c.dev.Name, "destroy", derr)))
			}
			return fail(err)
		}
	}
	c.live[id] = self
	return nil
}

// runCreate sends the create command (ioctl first, per-method write
// fallback) and returns the driver response.
func (c *Context) runCreate(o *object, cmd *createCmd, id uint64) ([]byte, error) {
	dd := cmd.drv
	var uhwOut []byte
	if cmd.ioctl != nil {
		send := func() error {
			ic := sys.NewIoctl(c.arena, cmd.kind.object, cmd.method, c.dev.DriverID)
			h := ic.NewIDR(cmd.handleAttr)
			parse := cmd.ioctl(ic, id)
			if len(dd.In) > 0 {
				ic.PtrIn(abi.UVERBS_ATTR_UHW_IN, dd.In)
			}
			if dd.OutLen > 0 {
				uhwOut = ic.PtrOut(abi.UVERBS_ATTR_UHW_OUT, dd.OutLen)
			}
			if err := ic.Exec(c.fd); err != nil {
				return err
			}
			o.handle = uint32(ic.Data(h))
			parse()
			return nil
		}
		if cmd.writeIn == nil { // no legacy form: the ioctl's answer stands
			return uhwOut, send()
		}
		ran, err := c.tryIoctl(cmd.kind.object, cmd.method, send)
		if ran {
			return uhwOut, err
		}
		c.arena.Reset()
	}
	in := cmd.writeIn(id)
	// One allocation for both responses: the kernel takes one address.
	out := c.arena.Alloc(cmd.writeOutLen + dd.OutLen)
	if out == nil {
		return nil, sys.ErrArenaFull
	}
	w := &sys.WriteCommand{Cmd: cmd.writeCmd, Extended: cmd.writeEx, CoreIn: in, UHWIn: arenaCopy(c.arena, dd.In),
		CoreOut: out[:cmd.writeOutLen], UHWOut: out[cmd.writeOutLen:]}
	if err := c.execWrite(w); err != nil {
		return nil, err
	}
	o.handle = cmd.writeParse(w.CoreOut)
	return w.UHWOut, nil
}

// destroyLocked destroys o's kernel object: OBJECT/DESTROY with its handle,
// or the legacy write command on kernels without the method. Callers hold
// c.mu.
func (c *Context) destroyLocked(o *object) error {
	k := o.kind
	if k.writeDestroy == nil { // not a kernel object with a handle
		return nil
	}
	ran, err := c.tryIoctl(k.object, k.destroyMethod, func() error {
		cmd := sys.NewIoctl(c.arena, k.object, k.destroyMethod, c.dev.DriverID)
		cmd.IDR(k.destroyHandle, o.handle)
		if k.destroyResp >= 0 {
			cmd.PtrOut(uint16(k.destroyResp), k.destroyRespLen)
		}
		return cmd.Exec(c.fd)
	})
	if ran {
		return err
	}
	c.arena.Reset()
	return c.execWrite(k.writeDestroy(c, o.handle))
}

// closeObject is the one close path: idempotent, safe against concurrent
// Close and Context.Close. The kernel object goes first; if the kernel
// refuses because children still use it, the object stays open and usable
// and the error wraps ErrBusy. drvDestroy (may be nil) then releases the
// provider's half.
func (o *object) closeObject(op string, drvDestroy func() error) error {
	if o == nil || o.ctx == nil {
		return nil
	}
	c := o.ctx
	c.mu.Lock()
	defer c.mu.Unlock()
	if o.closed.Load() {
		return nil
	}
	if c.closed { // the context's Close took the object with it
		o.closed.Store(true)
		return nil
	}
	c.arena.Reset()
	if err := c.destroyLocked(o); err != nil && !c.fatal.Load() {
		// (After the device went away, a failed destroy still closes the
		// object: the kernel frees what is left with the file.)
		if sys.ErrnoOf(err) == sys.EBUSY {
			return &Error{Op: op, Device: c.dev.Name, Err: fmt.Errorf("%w: %w", ErrBusy, err),
				Hint: "destroy its " + o.kind.children + " first"}
		}
		return opErr(c.dev.Name, op, err)
	}
	o.closed.Store(true)
	delete(c.live, o.id)
	if drvDestroy != nil {
		return opErr(c.dev.Name, op, drvDestroy())
	}
	return nil
}

// ErrBusy is wrapped by Close when the kernel refuses to destroy an object
// that others still use (EBUSY): close those first. The object stays open.
var ErrBusy = errors.New("object in use")

// lookup finds a live object by its user handle. Callers hold c.mu.
func (c *Context) lookup(id uint64) any { return c.live[id] }

// Every object is an io.Closer.
var (
	_ io.Closer = (*Context)(nil)
	_ io.Closer = (*PD)(nil)
	_ io.Closer = (*MR)(nil)
	_ io.Closer = (*CompChannel)(nil)
	_ io.Closer = (*CQ)(nil)
	_ io.Closer = (*QP)(nil)
	_ io.Closer = (*SRQ)(nil)
	_ io.Closer = (*AH)(nil)
	_ io.Closer = (*MW)(nil)
	_ io.Closer = (*Memory)(nil)
)

// LiveObjects counts this context's open objects by kind (for tests and
// diagnostics).
func (c *Context) LiveObjects() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for _, v := range c.live {
		if o, ok := v.(interface{ base() *object }); ok {
			out[o.base().kind.name]++
		}
	}
	return out
}

func arenaCopy(a *sys.Arena, b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	d := a.Alloc(len(b))
	copy(d, b)
	return d
}
