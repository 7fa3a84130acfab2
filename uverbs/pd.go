package uverbs

import (
	"sync/atomic"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
)

// PD is a protection domain: MRs, MWs, QPs, SRQs and AHs live in one and
// can only be used with each other.
//
// Concurrency: every method is safe for concurrent use. SGEBytes, called by
// providers on the datapath, takes no lock.
type PD struct {
	object
	// mrs is the PD's registered memory as providers see it (SGEBytes): a
	// copy-on-write snapshot replaced under ctx.mu, read without a lock.
	mrs atomic.Pointer[[]mrRange]
}

// mrRange is one registered region as seen by SGEBytes.
type mrRange struct {
	mr   *MR
	lkey uint32
	buf  []byte
}

// AllocPD allocates a protection domain (ALLOC_PD).
func (c *Context) AllocPD() (*PD, error) {
	if err := c.lock(); err != nil {
		return nil, opErr(c.dev.Name, "alloc pd", err)
	}
	defer c.mu.Unlock()
	pd := &PD{}
	return pd, c.create(&pd.object, pd, &createCmd{kind: kindPD, op: "alloc pd",
		writeCmd: abi.IB_USER_VERBS_CMD_ALLOC_PD, writeOutLen: abi.Size[abi.AllocPDResp](),
		writeIn: func(uint64) []byte {
			_, b := alloc[abi.AllocPD](c)
			return b
		},
		writeParse: func(out []byte) uint32 { return abi.As[abi.AllocPDResp](out).PDHandle },
	}, nil, nil)
}

// Close deallocates the PD. The kernel refuses (EBUSY, ErrBusy) while MRs,
// MWs, QPs, SRQs or AHs still use it; the PD then stays usable.
func (pd *PD) Close() error {
	if pd == nil {
		return nil
	}
	return pd.closeObject("dealloc pd", nil)
}

// SGEBytes returns the registered memory an inline SGE names: the bytes at
// the SGE's virtual address and length, if they lie inside the memory of the
// MR of this PD whose lkey is sge.LKey. ok is false when no such MR exists or
// the range does not lie inside it. The address is a virtual address, not
// the MR's IOVA, because inline data is copied by the CPU (rdma-core's
// providers memcpy from (void *)sge->addr): an SGE in a custom-IOVA MR's
// address space is refused here instead of faulting the process. It is what a
// provider's inline send copies from (the kernel never sees that memory, so
// nobody else checks it); it allocates nothing and takes no lock.
func (pd *PD) SGEBytes(sge SGE) (b []byte, ok bool) {
	p := pd.mrs.Load()
	if p == nil {
		return nil, false
	}
	for i := range *p {
		r := &(*p)[i]
		if r.lkey != sge.LKey {
			continue
		}
		base := sys.Addr(r.buf)
		if sge.Addr < base {
			return nil, false
		}
		off := sge.Addr - base
		if off > uint64(len(r.buf)) || uint64(sge.Length) > uint64(len(r.buf))-off {
			return nil, false
		}
		return r.buf[off : off+uint64(sge.Length) : off+uint64(sge.Length)], true
	}
	return nil, false
}

// setMR publishes mr's current keys and range (nil buf: mr leaves the
// snapshot). Callers hold ctx.mu.
func (pd *PD) setMR(mr *MR, keep bool) {
	var next []mrRange
	if p := pd.mrs.Load(); p != nil {
		for _, r := range *p {
			if r.mr != mr {
				next = append(next, r)
			}
		}
	}
	if keep && mr.buf != nil {
		next = append(next, mrRange{mr: mr, lkey: mr.lkey, buf: mr.buf})
	}
	pd.mrs.Store(&next)
}
