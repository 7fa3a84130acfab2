package uverbs

import (
	"sync/atomic"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
)

// PD is a protection domain: MRs, MWs, QPs, SRQs and AHs live in one and
// can only be used with each other.
//
// Concurrency: every method is safe for concurrent use. SGEBytes, Registered
// and MRGeneration, called by providers on the datapath, take no lock.
type PD struct {
	object
	// mrs is the PD's registered memory as providers see it (SGEBytes): a
	// copy-on-write snapshot replaced under ctx.mu, read without a lock.
	mrs atomic.Pointer[[]mrRange]
	// mrGen counts the changes of mrs (MRGeneration).
	mrGen Generation
}

// Generation is a counter that moves whenever what it counts changes, so
// that a reader can tell whether something it derived is still current.
// Load is safe for concurrent use and costs one memory read.
type Generation struct{ v atomic.Uint64 }

// Load returns the current generation.
func (g *Generation) Load() uint64 { return g.v.Load() }

// MRGeneration is the generation of the PD's registered memory: it moves
// after every registration, deregistration or re-registration in the PD,
// once Registered answers from the new set. A provider may keep what
// Registered returned across posts while it reads the same generation
// before each post.
func (pd *PD) MRGeneration() *Generation { return &pd.mrGen }

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
	base, r := pd.Registered(sge.LKey, sge.Addr, int(sge.Length))
	if r == nil {
		return nil, false
	}
	off := sge.Addr - base
	return r[off : off+uint64(sge.Length) : off+uint64(sge.Length)], true
}

// Registered is SGEBytes for a provider that looks up many SGEs in a row:
// it returns the whole memory of the MR whose lkey is lkey, if the n bytes
// at virtual address addr lie inside it, and base, the virtual address of
// its first byte; r is nil otherwise. A provider may check later SGEs of the
// same post against r itself instead of calling again; r is the memory as
// registered when it was looked up, so it must not be kept beyond the post
// unless MRGeneration has not moved since (a deregistered MR's memory can be
// unmapped).
func (pd *PD) Registered(lkey uint32, addr uint64, n int) (base uint64, r []byte) {
	p := pd.mrs.Load()
	if p == nil || n < 0 {
		return 0, nil
	}
	for i := range *p {
		m := &(*p)[i]
		if m.lkey != lkey {
			continue
		}
		base = sys.Addr(m.buf)
		off := addr - base
		if addr < base || off > uint64(len(m.buf)) || uint64(n) > uint64(len(m.buf))-off {
			return 0, nil
		}
		return base, m.buf
	}
	return 0, nil
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
	pd.mrGen.v.Add(1)
}
