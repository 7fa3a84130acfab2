package uverbs

import (
	"sync/atomic"
	"unsafe"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
)

// PD is a protection domain: MRs, QPs, SRQs and AHs live in one and can only
// be used with each other.
type PD struct {
	object
	// mrs is the PD's registered memory by lkey, for LocalBytes: replaced
	// whole (copy on write) under the context lock, read without locks.
	mrs atomic.Pointer[map[uint32][]byte]
}

// AllocPD allocates a protection domain (ALLOC_PD).
func (c *Context) AllocPD() (*PD, error) {
	if err := c.lock(); err != nil {
		return nil, opErr(c.dev.Name, "alloc pd", err)
	}
	defer c.mu.Unlock()
	in := c.arena.Alloc(int(unsafe.Sizeof(abi.AllocPD{})))
	out := c.arena.Alloc(int(unsafe.Sizeof(abi.AllocPDResp{})))
	if err := c.execWrite(&sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_ALLOC_PD, CoreIn: in, CoreOut: out}); err != nil {
		return nil, opErr(c.dev.Name, "alloc pd", err)
	}
	pd := &PD{}
	pd.handle = (*abi.AllocPDResp)(unsafe.Pointer(&out[0])).PDHandle
	c.register(&pd.object, "pd", pd)
	return pd, nil
}

// Close deallocates the PD. The kernel refuses (EBUSY) while MRs, QPs, SRQs
// or AHs still use it; the PD then stays usable.
func (pd *PD) Close() error {
	if pd == nil || pd.closed.Load() {
		return nil
	}
	c := pd.ctx
	if err := c.lock(); err != nil {
		pd.closed.Store(true)
		return nil // the context is gone and took the PD with it
	}
	defer c.mu.Unlock()
	_, err := c.destroy(abi.UVERBS_OBJECT_PD, abi.UVERBS_METHOD_PD_DESTROY, abi.UVERBS_ATTR_DESTROY_PD_HANDLE, pd.handle, -1, 0,
		func() *sys.WriteCommand {
			in := c.arena.Alloc(int(unsafe.Sizeof(abi.DeallocPD{})))
			(*abi.DeallocPD)(unsafe.Pointer(&in[0])).PDHandle = pd.handle
			return &sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_DEALLOC_PD, CoreIn: in}
		})
	if err != nil {
		return busyErr(c.dev.Name, "dealloc pd", "MRs, QPs, SRQs and AHs", err)
	}
	pd.closed.Store(true)
	c.unregister(&pd.object)
	return nil
}

// destroy runs OBJECT/DESTROY with the object's handle (and an optional
// PTR_OUT response attribute), falling back to the legacy write command.
// Callers hold c.mu. It returns the response bytes (nil on the write path
// when the command has none).
func (c *Context) destroy(object, method, handleAttr uint16, handle uint32, respAttr int, respLen int,
	write func() *sys.WriteCommand) ([]byte, error) {
	var resp []byte
	ran, err := c.tryIoctl(object, method, func() error {
		cmd := sys.NewIoctl(c.arena, object, method, c.dev.DriverID)
		cmd.IDR(handleAttr, handle)
		if respAttr >= 0 {
			resp = cmd.PtrOut(uint16(respAttr), respLen)
		}
		return cmd.Exec(c.fd)
	})
	if ran {
		return resp, err
	}
	w := write()
	if err := c.execWrite(w); err != nil {
		return nil, err
	}
	return w.CoreOut, nil
}
