package uverbs

import (
	"fmt"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

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
		{AccessOnDemand, "ON_DEMAND"}, {AccessHugeTLB, "HUGETLB"}, {AccessRelaxedOrdering, "RELAXED_ORDERING"}}
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

// LocalBytes returns the n bytes at virtual address addr if they lie inside
// memory registered in this PD under lkey, and nil otherwise. Providers copy
// inline send data through it instead of dereferencing an address taken from
// a work request (which may be an MR's custom IOVA, or garbage). It allocates
// nothing and is safe to call concurrently with everything, including
// registration and deregistration.
func (pd *PD) LocalBytes(lkey uint32, addr uint64, n int) []byte {
	t := pd.mrs.Load()
	if t == nil || n < 0 {
		return nil
	}
	buf, ok := (*t)[lkey]
	if !ok {
		return nil
	}
	base := sys.Addr(buf)
	if addr < base || addr-base > uint64(len(buf)) || uint64(n) > uint64(len(buf))-(addr-base) {
		return nil
	}
	off := int(addr - base)
	return buf[off : off+n : off+n]
}

// setLocal records (buf != nil) or forgets (buf == nil) lkey's memory for
// LocalBytes; the context lock is held.
func (pd *PD) setLocal(lkey uint32, buf []byte) {
	next := map[uint32][]byte{}
	if t := pd.mrs.Load(); t != nil {
		for k, v := range *t {
			next[k] = v
		}
	}
	if buf != nil {
		next[lkey] = buf
	} else {
		delete(next, lkey)
	}
	pd.mrs.Store(&next)
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
		return nil, &Error{Op: "reg mr", Device: c.dev.Name, Err: fmt.Errorf("%w: empty buffer", sys.NewErrno(unix.EINVAL))}
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
	if err := c.lock(); err != nil {
		return nil, opErr(c.dev.Name, "reg mr", err)
	}
	defer c.mu.Unlock()
	in := c.arena.Alloc(int(unsafe.Sizeof(abi.RegMR{})))
	r := (*abi.RegMR)(unsafe.Pointer(&in[0]))
	r.Start = sys.Addr(buf)
	r.Length = uint64(len(buf))
	r.HCAVA = iova
	r.PDHandle = pd.handle
	r.AccessFlags = uint32(access)
	out := c.arena.Alloc(int(unsafe.Sizeof(abi.RegMRResp{})))
	if err := c.execWrite(&sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_REG_MR, CoreIn: in, CoreOut: out}); err != nil {
		if h := accessHint(access); h != "" && sys.ErrnoOf(err) == unix.EINVAL {
			return nil, &Error{Op: "reg mr", Device: c.dev.Name, Err: err, Hint: h}
		}
		return nil, memlockErr(c.dev.Name, "reg mr", err)
	}
	resp := (*abi.RegMRResp)(unsafe.Pointer(&out[0]))
	mr := &MR{pd: pd, buf: buf, iova: iova, lkey: resp.LKey, rkey: resp.RKey, access: access}
	mr.handle = resp.MRHandle
	c.register(&mr.object, "mr", mr)
	pd.setLocal(mr.lkey, buf)
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
	if err := c.lock(); err != nil {
		return nil, opErr(c.dev.Name, "reg dma-buf mr", err)
	}
	defer c.mu.Unlock()
	cmd := sys.NewIoctl(c.arena, abi.UVERBS_OBJECT_MR, abi.UVERBS_METHOD_REG_DMABUF_MR, c.dev.DriverID)
	h := cmd.NewIDR(abi.UVERBS_ATTR_REG_DMABUF_MR_HANDLE)
	cmd.IDR(abi.UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE, pd.handle)
	cmd.U64(abi.UVERBS_ATTR_REG_DMABUF_MR_OFFSET, offset)
	cmd.U64(abi.UVERBS_ATTR_REG_DMABUF_MR_LENGTH, length)
	cmd.U64(abi.UVERBS_ATTR_REG_DMABUF_MR_IOVA, iova)
	cmd.U32(abi.UVERBS_ATTR_REG_DMABUF_MR_FD, uint32(fd)) // a u32 PTR_IN, not an FD attribute
	cmd.U32(abi.UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS, uint32(access))
	lkey := cmd.PtrOut(abi.UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY, 4)
	rkey := cmd.PtrOut(abi.UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY, 4)
	if err := cmd.Exec(c.fd); err != nil {
		if sys.IsNotSupportedErrno(sys.ErrnoOf(err)) {
			return nil, &Error{Op: "reg dma-buf mr", Device: c.dev.Name,
				Err: fmt.Errorf("%w: %s cannot register dma-buf memory: %v", ErrNotSupported, c.dev.Name, err)}
		}
		return nil, memlockErr(c.dev.Name, "reg dma-buf mr", err)
	}
	mr := &MR{pd: pd, iova: iova, lkey: le32(lkey), rkey: le32(rkey), access: access}
	mr.handle = uint32(cmd.Data(h))
	c.register(&mr.object, "mr", mr)
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
	if err := c.lock(); err != nil {
		return opErr(c.dev.Name, "rereg mr", err)
	}
	defer c.mu.Unlock()
	in := c.arena.Alloc(int(unsafe.Sizeof(abi.ReregMR{})))
	r := (*abi.ReregMR)(unsafe.Pointer(&in[0]))
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
	out := c.arena.Alloc(int(unsafe.Sizeof(abi.ReregMRResp{})))
	if err := c.execWrite(&sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_REREG_MR, CoreIn: in, CoreOut: out}); err != nil {
		if sys.IsNotSupportedErrno(sys.ErrnoOf(err)) {
			return &Error{Op: "rereg mr", Device: c.dev.Name, Err: fmt.Errorf("%w: %v", ErrNotSupported, err)}
		}
		return memlockErr(c.dev.Name, "rereg mr", err)
	}
	resp := (*abi.ReregMRResp)(unsafe.Pointer(&out[0]))
	if mr.buf != nil {
		mr.pd.setLocal(mr.lkey, nil)
	}
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
	if mr.buf != nil {
		mr.pd.setLocal(mr.lkey, mr.buf)
	}
	return nil
}

// Close deregisters the region (the memory itself stays mapped).
func (mr *MR) Close() error {
	if mr == nil || mr.closed.Load() {
		return nil
	}
	c := mr.ctx
	if err := c.lock(); err != nil {
		mr.closed.Store(true)
		return nil
	}
	defer c.mu.Unlock()
	_, err := c.destroy(abi.UVERBS_OBJECT_MR, abi.UVERBS_METHOD_MR_DESTROY, abi.UVERBS_ATTR_DESTROY_MR_HANDLE, mr.handle, -1, 0,
		func() *sys.WriteCommand {
			in := c.arena.Alloc(int(unsafe.Sizeof(abi.DeregMR{})))
			(*abi.DeregMR)(unsafe.Pointer(&in[0])).MRHandle = mr.handle
			return &sys.WriteCommand{Cmd: abi.IB_USER_VERBS_CMD_DEREG_MR, CoreIn: in}
		})
	if err != nil {
		return busyErr(c.dev.Name, "dereg mr", "memory windows", err)
	}
	mr.closed.Store(true)
	c.unregister(&mr.object)
	if mr.buf != nil {
		mr.pd.setLocal(mr.lkey, nil)
	}
	return nil
}
