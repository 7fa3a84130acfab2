package uverbs

import (
	"fmt"
	"strings"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
)

// Access is a set of memory and QP access rights (enum ibv_access_flags).
type Access uint32

const (
	AccessLocalWrite      Access = abi.IB_UVERBS_ACCESS_LOCAL_WRITE
	AccessRemoteWrite     Access = abi.IB_UVERBS_ACCESS_REMOTE_WRITE
	AccessRemoteRead      Access = abi.IB_UVERBS_ACCESS_REMOTE_READ
	AccessRemoteAtomic    Access = abi.IB_UVERBS_ACCESS_REMOTE_ATOMIC
	AccessMWBind          Access = abi.IB_UVERBS_ACCESS_MW_BIND
	AccessZeroBased       Access = abi.IB_UVERBS_ACCESS_ZERO_BASED
	AccessOnDemand        Access = abi.IB_UVERBS_ACCESS_ON_DEMAND
	AccessHugeTLB         Access = abi.IB_UVERBS_ACCESS_HUGETLB
	AccessRelaxedOrdering Access = abi.IB_UVERBS_ACCESS_RELAXED_ORDERING
)

func (a Access) String() string {
	names := []struct {
		a Access
		n string
	}{{AccessLocalWrite, "LOCAL_WRITE"}, {AccessRemoteWrite, "REMOTE_WRITE"}, {AccessRemoteRead, "REMOTE_READ"},
		{AccessRemoteAtomic, "REMOTE_ATOMIC"}, {AccessMWBind, "MW_BIND"}, {AccessZeroBased, "ZERO_BASED"},
		{AccessOnDemand, "ON_DEMAND"}, {AccessHugeTLB, "HUGETLB"}, {AccessFlushGlobal, "FLUSH_GLOBAL"},
		{AccessFlushPersistent, "FLUSH_PERSISTENT"}, {AccessRelaxedOrdering, "RELAXED_ORDERING"}}
	var parts []string
	for _, x := range names {
		if a&x.a != 0 {
			parts = append(parts, x.n)
			a &^= x.a
		}
	}
	if a != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint32(a)))
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, "|")
}

// MR is a registered memory region.
//
// Concurrency: the accessors (LKey, RKey, Addr, SGE, ...) and Close are safe
// for concurrent use with each other. Rereg changes keys and range: it must
// not run concurrently with other methods of the same MR or with work
// requests that use it (as in rdma-core, where ibv_rereg_mr requires the MR
// be idle). Providers read the registered range through PD.SGEBytes, which
// Rereg updates atomically.
type MR struct {
	object
	pd     *PD
	buf    []byte
	iova   uint64
	lkey   uint32
	rkey   uint32
	access Access
}

// LKey is the key local work requests name the region by.
func (mr *MR) LKey() uint32 { return mr.lkey }

// RKey is the key a remote peer names the region by in RDMA and atomics.
func (mr *MR) RKey() uint32 { return mr.rkey }

// Addr is the region's I/O virtual address (what SGEs and remote_addr use).
func (mr *MR) Addr() uint64 { return mr.iova }

// Len is the region's length.
func (mr *MR) Len() int { return len(mr.buf) }

// Bytes is the registered memory.
func (mr *MR) Bytes() []byte { return mr.buf }

// Access is the region's access rights.
func (mr *MR) Access() Access { return mr.access }

// PD is the protection domain the region belongs to.
func (mr *MR) PD() *PD { return mr.pd }

// SGE returns a scatter/gather entry for length bytes at offset off.
func (mr *MR) SGE(off, length int) SGE {
	return SGE{Addr: mr.iova + uint64(off), Length: uint32(length), LKey: mr.lkey}
}

// SGEOf returns the scatter/gather entry naming b when b lies wholly
// inside the region (a slice of the registered buffer, or of the same
// mapping at the same addresses), and false otherwise. A sender holding
// slices of registered memory (aeron:ib's term buffers) posts them without
// a copy this way. It compares addresses only and allocates nothing; not
// safe to call concurrently with Rereg.
func (mr *MR) SGEOf(b []byte) (SGE, bool) {
	if len(b) == 0 || len(mr.buf) == 0 {
		return SGE{}, false
	}
	a, start := sys.Addr(b), sys.Addr(mr.buf)
	if a < start || a+uint64(len(b)) > start+uint64(len(mr.buf)) {
		return SGE{}, false
	}
	return mr.SGE(int(a-start), len(b)), true
}

func accessHint(a Access) string {
	if a&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && a&AccessLocalWrite == 0 {
		return "REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE too"
	}
	return ""
}

// RegMR registers buf with the device. buf must be memory the Go runtime does
// not manage: a Memory from AllocMemory, or a file or anonymous mapping
// (never a Go-allocated slice, which the runtime may move or free while the
// device still writes it). The I/O virtual address is buf's address.
func (pd *PD) RegMR(buf []byte, access Access) (*MR, error) {
	return pd.RegMRIOVA(buf, sys.Addr(buf), access)
}

// RegMRIOVA registers buf under the given I/O virtual address.
func (pd *PD) RegMRIOVA(buf []byte, iova uint64, access Access) (*MR, error) {
	if err := pd.check(); err != nil {
		return nil, opErr("", "reg mr", err)
	}
	c := pd.ctx
	if len(buf) == 0 {
		return nil, &Error{Op: "reg mr", Device: c.dev.Name, Err: fmt.Errorf("%w: empty buffer", sys.NewErrno(sys.EINVAL))}
	}
	if access&AccessOnDemand != 0 {
		// rxe answers a bare EINVAL; say what is missing instead.
		if a, err := c.QueryDevice(); err == nil && a.ODPGeneralCaps&1 == 0 {
			return nil, &Error{Op: "reg mr", Device: c.dev.Name,
				Err: fmt.Errorf("%w: %s has no on-demand paging (ODP)", ErrNotSupported, c.dev.Name)}
		}
	}
	if err := CheckMemlock(len(buf)); err != nil {
		e := err.(*Error)
		e.Op, e.Device = "reg mr", c.dev.Name
		return nil, e
	}
	if err := c.lock(&pd.object); err != nil {
		return nil, opErr(c.dev.Name, "reg mr", err)
	}
	defer c.mu.Unlock()
	mr := &MR{pd: pd, buf: buf, iova: iova, access: access}
	err := c.create(&mr.object, mr, &createCmd{kind: kindMR, op: "reg mr",
		writeCmd: abi.IB_USER_VERBS_CMD_REG_MR, writeOutLen: abi.Size[abi.RegMRResp](),
		writeIn: func(uint64) []byte {
			r, b := alloc[abi.RegMR](c)
			r.Start, r.Length, r.HCAVA = sys.Addr(buf), uint64(len(buf)), iova
			r.PDHandle, r.AccessFlags = pd.handle, uint32(access)
			return b
		},
		writeParse: func(out []byte) uint32 {
			r := abi.As[abi.RegMRResp](out)
			mr.lkey, mr.rkey = r.LKey, r.RKey
			return r.MRHandle
		},
		errMap: func(err error) error {
			if h := accessHint(access); h != "" && sys.ErrnoOf(err) == sys.EINVAL {
				return &Error{Op: "reg mr", Device: c.dev.Name, Err: err, Hint: h}
			}
			return memlockErr(c.dev.Name, "reg mr", err)
		},
	}, nil, nil)
	if err != nil {
		return nil, err
	}
	pd.setMR(mr, true)
	return mr, nil
}

// RegDmaBufMR registers length bytes at offset of a dma-buf (device memory
// exported by a GPU or udmabuf driver). Devices without dma-buf support
// (rxe, kernels before 5.12) give ErrNotSupported.
func (pd *PD) RegDmaBufMR(fd int, offset, length, iova uint64, access Access) (*MR, error) {
	if err := pd.check(); err != nil {
		return nil, opErr("", "reg dma-buf mr", err)
	}
	c := pd.ctx
	if err := c.lock(&pd.object); err != nil {
		return nil, opErr(c.dev.Name, "reg dma-buf mr", err)
	}
	defer c.mu.Unlock()
	mr := &MR{pd: pd, iova: iova, access: access}
	err := c.create(&mr.object, mr, &createCmd{kind: kindMR, op: "reg dma-buf mr",
		method: abi.UVERBS_METHOD_REG_DMABUF_MR, handleAttr: abi.UVERBS_ATTR_REG_DMABUF_MR_HANDLE,
		ioctl: func(cmd *sys.IoctlCmd, _ uint64) func() {
			cmd.IDR(abi.UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE, pd.handle)
			cmd.U64(abi.UVERBS_ATTR_REG_DMABUF_MR_OFFSET, offset)
			cmd.U64(abi.UVERBS_ATTR_REG_DMABUF_MR_LENGTH, length)
			cmd.U64(abi.UVERBS_ATTR_REG_DMABUF_MR_IOVA, iova)
			cmd.U32(abi.UVERBS_ATTR_REG_DMABUF_MR_FD, uint32(fd)) // a u32 PTR_IN, not an FD attribute
			cmd.U32(abi.UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS, uint32(access))
			lkey := cmd.PtrOut(abi.UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY, 4)
			rkey := cmd.PtrOut(abi.UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY, 4)
			return func() { mr.lkey, mr.rkey = le32(lkey), le32(rkey) }
		},
		// No write form: a kernel without the method answers ENOTTY or
		// EPROTONOSUPPORT, reported as not supported.
		errMap: func(err error) error {
			if sys.IsNotSupportedErrno(sys.ErrnoOf(err)) {
				return &Error{Op: "reg dma-buf mr", Device: c.dev.Name,
					Err: fmt.Errorf("%w: %s cannot register dma-buf memory: %v", ErrNotSupported, c.dev.Name, err)}
			}
			return memlockErr(c.dev.Name, "reg dma-buf mr", err)
		},
	}, nil, nil)
	if err != nil {
		return nil, err
	}
	return mr, nil
}

// Rereg flags (IB_MR_REREG_*).
const (
	ReregTranslation = 1 << 0 // new address range
	ReregPD          = 1 << 1 // move to another PD
	ReregAccess      = 1 << 2 // new access rights
)

// Rereg changes the region in place (REREG_MR): its translation (buf), its
// PD and/or its access rights, as flags select. Devices that cannot
// (rxe cannot change translation) give ErrNotSupported; the region is then
// unchanged.
func (mr *MR) Rereg(flags int, pd *PD, buf []byte, access Access) error {
	if err := mr.check(); err != nil {
		return opErr("", "rereg mr", err)
	}
	c := mr.ctx
	if flags&ReregPD != 0 {
		if err := pd.check(); err != nil {
			return opErr(c.dev.Name, "rereg mr", err)
		}
	}
	var newPD *object
	if flags&ReregPD != 0 {
		newPD = &pd.object
	}
	if err := c.lock(&mr.object, newPD); err != nil {
		return opErr(c.dev.Name, "rereg mr", err)
	}
	defer c.mu.Unlock()
	r, in := alloc[abi.ReregMR](c)
	r.MRHandle = mr.handle
	r.Flags = uint32(flags)
	if flags&ReregTranslation != 0 {
		r.Start, r.Length, r.HCAVA = sys.Addr(buf), uint64(len(buf)), sys.Addr(buf)
	}
	if flags&ReregPD != 0 {
		r.PDHandle = pd.handle
	}
	if flags&ReregAccess != 0 {
		r.AccessFlags = uint32(access)
	}
	out := c.arena.Alloc(abi.Size[abi.ReregMRResp]())
	if err := c.execWrite(&sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_REREG_MR, CoreIn: in, CoreOut: out}); err != nil {
		if sys.IsNotSupportedErrno(sys.ErrnoOf(err)) {
			return &Error{Op: "rereg mr", Device: c.dev.Name, Err: fmt.Errorf("%w: %v", ErrNotSupported, err)}
		}
		return memlockErr(c.dev.Name, "rereg mr", err)
	}
	resp := abi.As[abi.ReregMRResp](out)
	oldPD := mr.pd
	mr.lkey, mr.rkey = resp.LKey, resp.RKey
	if flags&ReregTranslation != 0 {
		mr.buf, mr.iova = buf, sys.Addr(buf)
	}
	if flags&ReregPD != 0 {
		mr.pd = pd
	}
	if flags&ReregAccess != 0 {
		mr.access = access
	}
	oldPD.setMR(mr, false)
	mr.pd.setMR(mr, true)
	return nil
}

// Close deregisters the region (the memory itself stays mapped).
func (mr *MR) Close() error {
	if mr == nil {
		return nil
	}
	return mr.closeObject("dereg mr", func() error {
		mr.pd.setMR(mr, false) // under ctx.mu, as every snapshot update
		return nil
	})
}
