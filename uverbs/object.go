package uverbs

import (
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/ibgo/ibgo/internal/sys"
)

// object is what every verbs object shares: its context, kernel handle and
// closed state. The registry key (ID) is also the user_handle the kernel
// echoes in events, so an event finds its Go object without a pointer ever
// crossing the kernel boundary.
type object struct {
	ctx    *Context
	kind   string // "pd", "cq", ...
	id     uint64 // registry key and user_handle
	handle uint32
	closed atomic.Bool
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

// register adds an object to its context's registry and gives it an id.
// Callers hold c.mu.
func (c *Context) register(o *object, kind string, self any) {
	c.nextID++
	o.ctx, o.kind, o.id = c, kind, c.nextID
	c.live[o.id] = self
}

func (c *Context) unregister(o *object) {
	delete(c.live, o.id)
}

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
	_ io.Closer = (*Memory)(nil)
)

// busyErr explains EBUSY from a destroy: the object still has children.
func busyErr(dev, op, children string, err error) error {
	if sys.ErrnoOf(err) == unix.EBUSY {
		return &Error{Op: op, Device: dev, Err: err, Hint: "destroy its " + children + " first"}
	}
	return opErr(dev, op, err)
}

// LiveObjects counts this context's open objects by kind (for tests and
// diagnostics).
func (c *Context) LiveObjects() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for _, v := range c.live {
		if o, ok := v.(interface{ base() *object }); ok {
			out[o.base().kind]++
		}
	}
	return out
}

func (o *object) base() *object { return o }

func (o *object) String() string {
	return fmt.Sprintf("%s %d on %s", strings.ToUpper(o.kind), o.handle, o.ctx.dev.Name)
}
