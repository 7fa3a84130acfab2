package uverbs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
)

// arenaSize bounds one command with its payloads and responses; the largest
// is the GID table (32 bytes per entry, 1024 entries per rxe port).
const arenaSize = 256 << 10

// Context is an opened device: the uverbs command file, its async event file
// and the provider's state.
//
// Concurrency: every method is safe for concurrent use. Commands (creating,
// modifying, querying and destroying objects) are serialised by one mutex,
// as they share one command arena; GetAsyncEvent waits on the runtime poller
// without holding it. Close waits for a command in flight, then makes every
// later call (on the Context or any object created on it) return ErrClosed.
type Context struct {
	dev  *Device
	prov ProviderContext

	mu             sync.Mutex // guards arena and the fields below
	fd             *sys.FD
	asyncFD        *sys.PollFD // async event file, on the runtime poller
	arena          *sys.Arena
	numCompVectors int
	coreSupport    uint64
	useIoctlWrite  bool               // INVOKE_WRITE works: send write commands through it
	noIoctl        map[[2]uint16]bool // ioctl methods the kernel refused: use write from now on
	closed         bool
	live           map[uint64]any // open objects by id (= user_handle)
	nextID         uint64         // last user handle given out (Context.create)

	// The device went away or failed (fatal.go): fatal fails every later
	// command and post; fatalPending is the EventDeviceFatal not yet
	// handed out; gone is cancelled then, to wake event waiters.
	fatal        atomic.Bool
	fatalPending atomic.Bool
	gone         context.Context
	goneCancel   context.CancelFunc
}

// Open opens the device with the given name.
func Open(name string) (*Context, error) {
	d, err := DeviceByName(name)
	if err != nil {
		return nil, err
	}
	return d.Open()
}

// Open creates a verbs context on the device: it opens the uverbs char
// device, sends GET_CONTEXT (ioctl first, the legacy write command on
// kernels without it) with the provider's driver data, and allocates the
// async event file.
func (d *Device) Open() (*Context, error) {
	if d.UverbsPath == "" {
		return nil, &Error{Op: "open", Device: d.Name,
			Err:  fmt.Errorf("%w: no uverbs character device for %s", ErrNoDevice, d.Name),
			Hint: "load ib_uverbs (modprobe ib_uverbs)"}
	}
	p, err := providerFor(d)
	if err != nil {
		return nil, &Error{Op: "open", Device: d.Name, Err: err}
	}
	fd, err := sys.Open(d.UverbsPath, sys.O_RDWR)
	if err != nil {
		return nil, &Error{Op: "open", Device: d.Name, Err: err}
	}
	arena, err := sys.NewArena(arenaSize)
	if err != nil {
		fd.Close()
		return nil, &Error{Op: "open", Device: d.Name, Err: err}
	}
	c := &Context{dev: d, fd: fd, arena: arena, noIoctl: map[[2]uint16]bool{}, live: map[uint64]any{}}
	c.gone, c.goneCancel = context.WithCancel(context.Background())
	c.watchRemoval()
	pc, err := p.NewContext(d)
	if err != nil {
		c.closeLocked()
		return nil, &Error{Op: "open", Device: d.Name, Err: err}
	}
	c.prov = pc
	if err := c.getContext(); err != nil {
		c.closeLocked()
		return nil, opErr(d.Name, "get context", err)
	}
	if o, ok := pc.(ContextOpener); ok {
		if err := o.Opened(c); err != nil {
			c.closeLocked()
			return nil, opErr(d.Name, "open "+p.Name()+" context", err)
		}
	}
	return c, nil
}

// Device returns the device this context was opened on.
func (c *Context) Device() *Device { return c.dev }

// NumCompVectors is the number of completion vectors (interrupt queues).
func (c *Context) NumCompVectors() int { return c.numCompVectors }

// CoreSupport is the kernel's IB_UVERBS_CORE_SUPPORT_* bit mask (ioctl path only).
func (c *Context) CoreSupport() uint64 { return c.coreSupport }

// UsesIoctlWrite reports whether write commands travel through INVOKE_WRITE.
func (c *Context) UsesIoctlWrite() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.useIoctlWrite
}

// AsyncFD returns the async event file descriptor (for tests and pollers),
// -1 after Close.
func (c *Context) AsyncFD() int { return c.asyncFD.Int() }

// CmdFD is the uverbs command file (for providers: mmap of queues, doorbells).
func (c *Context) CmdFD() *sys.FD { return c.fd }

// Provider returns the provider's per-context state.
func (c *Context) Provider() ProviderContext { return c.prov }

// forceLegacyGetContext is a test hook (export_test.go).
var forceLegacyGetContext bool

func (c *Context) getContext() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	uhwIn, uhwOutLen := c.prov.ContextRequest()
	if forceLegacyGetContext {
		return c.getContextWrite(uhwIn, uhwOutLen)
	}
	c.arena.Reset()
	cmd := sys.NewIoctl(c.arena, abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_GET_CONTEXT, c.dev.DriverID)
	ncv := cmd.PtrOut(abi.UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS, 4)
	cs := cmd.PtrOut(abi.UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT, 8)
	if len(uhwIn) > 0 {
		cmd.PtrIn(abi.UVERBS_ATTR_UHW_IN, uhwIn)
	}
	var uhwOut []byte
	if uhwOutLen > 0 {
		uhwOut = cmd.PtrOut(abi.UVERBS_ATTR_UHW_OUT, uhwOutLen)
	}
	err := cmd.Exec(c.fd)
	switch {
	case err == nil:
		c.numCompVectors = int(le32(ncv))
		c.coreSupport = le64(cs)
		if err := c.prov.ContextResponse(uhwOut); err != nil {
			return err
		}
		// The ioctl GET_CONTEXT makes no async fd; allocate one
		// (rdma-core libibverbs/device.c: verbs_open_device).
		c.arena.Reset()
		a := sys.NewIoctl(c.arena, abi.UVERBS_OBJECT_ASYNC_EVENT, abi.UVERBS_METHOD_ASYNC_EVENT_ALLOC, c.dev.DriverID)
		i := a.NewFD(abi.UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE)
		if err := a.Exec(c.fd); err != nil {
			return fmt.Errorf("allocate async event fd: %w", err)
		}
		if c.asyncFD, err = sys.NewPollFD(sys.NewFD(int(int64(a.Data(i)))), "async-events"); err != nil {
			return fmt.Errorf("async event fd: %w", err)
		}
	case isFallback(err):
		if err := c.getContextWrite(uhwIn, uhwOutLen); err != nil {
			return err
		}
	default:
		return err
	}
	// rdma-core sends write commands through INVOKE_WRITE when the kernel
	// answers this probe with ENOSPC (libibverbs/device.c: has_ioctl_write).
	c.arena.Reset()
	probe := sys.NewIoctl(c.arena, abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_INVOKE_WRITE, c.dev.DriverID)
	probe.Const(abi.UVERBS_ATTR_WRITE_CMD, abi.IB_USER_VERBS_CMD_QUERY_DEVICE)
	c.useIoctlWrite = errors.Is(probe.Exec(c.fd), sys.ENOSPC)
	return nil
}

// getContextWrite is the legacy GET_CONTEXT (kernels before 5.6); it also
// returns the async event fd.
func (c *Context) getContextWrite(uhwIn []byte, uhwOutLen int) error {
	c.arena.Reset()
	_, in := alloc[abi.GetContext](c)
	n := abi.Size[abi.GetContextResp]()
	out := c.arena.Alloc(n + uhwOutLen)
	if out == nil {
		return sys.ErrArenaFull
	}
	w := &sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_GET_CONTEXT, CoreIn: in, UHWIn: arenaCopy(c.arena, uhwIn),
		CoreOut: out[:n], UHWOut: out[n:]}
	if err := sys.ExecWrite(c.fd, c.arena, w); err != nil {
		return err
	}
	r := abi.As[abi.GetContextResp](out)
	var err error
	if c.asyncFD, err = sys.NewPollFD(sys.NewFD(int(r.AsyncFD)), "async-events"); err != nil {
		return fmt.Errorf("async event fd: %w", err)
	}
	c.numCompVectors = int(r.NumCompVectors)
	return c.prov.ContextResponse(w.UHWOut)
}

// execWrite sends a write command through INVOKE_WRITE when the kernel has
// it, else through write(2). Callers hold c.mu.
func (c *Context) execWrite(w *sys.WriteCommand) error {
	if c.useIoctlWrite {
		err := sys.ExecInvokeWrite(c.fd, c.arena, c.dev.DriverID, w)
		if !isFallback(err) {
			return err
		}
	}
	return sys.ExecWrite(c.fd, c.arena, w)
}

// tryIoctl runs an ioctl method unless the kernel has already refused it on
// this context. It reports ran=false (and no error) when the caller must use
// the legacy write command instead, remembering that per method as
// rdma-core's cmd_fallback.c does.
func (c *Context) tryIoctl(object, method uint16, f func() error) (ran bool, err error) {
	key := [2]uint16{object, method}
	if c.noIoctl[key] {
		return false, nil
	}
	err = f()
	if isFallback(err) {
		c.noIoctl[key] = true
		return false, nil
	}
	return true, err
}

// check fails once the context is closed or its device gone.
func (c *Context) check() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if c.fatal.Load() {
		return ErrDeviceFatal
	}
	return nil
}

// lock takes the command lock, failing once the context or any of objs (nil
// entries are skipped) is closed. Objects close under this lock, so a
// command never goes out with the handle of a destroyed object (which the
// kernel may already have given to a new one).
func (c *Context) lock(objs ...*object) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	if c.fatal.Load() {
		c.mu.Unlock()
		return ErrDeviceFatal
	}
	for _, o := range objs {
		if o != nil && o.closed.Load() {
			c.mu.Unlock()
			return ErrClosed
		}
	}
	c.arena.Reset()
	return nil
}

// Close releases the context. Objects still open on it are destroyed by the
// kernel when the uverbs file closes; they are marked closed here and their
// provider mappings released, so later calls on them return ErrClosed.
// Close is idempotent.
func (c *Context) Close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeLocked()
}

func (c *Context) closeLocked() error {
	if c.closed {
		return nil
	}
	c.closed = true
	c.unwatchRemoval()
	if c.goneCancel != nil {
		c.goneCancel()
	}
	for _, v := range c.live {
		if r, ok := v.(releaser); ok {
			r.release()
		}
		if o, ok := v.(interface{ base() *object }); ok {
			o.base().closed.Store(true)
		}
	}
	clear(c.live)
	var errs []error
	if c.prov != nil {
		errs = append(errs, c.prov.Close())
	}
	errs = append(errs, c.asyncFD.Close(), c.fd.Close(), c.arena.Close())
	if err := errors.Join(errs...); err != nil {
		return opErr(c.dev.Name, "close", err)
	}
	return nil
}

func le32(b []byte) uint32 {
	if len(b) < 4 {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}

func le64(b []byte) uint64 {
	if len(b) < 8 {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}
