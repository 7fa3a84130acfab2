package sys

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/ibgo/ibgo/internal/abi"
)

// MaxAttrs bounds the attributes of one uverbs ioctl. The kernel's own limit
// is the page-sized header; no method uses more than about 20.
const MaxAttrs = 32

// ErrArenaFull means a command did not fit the command arena (a programming
// error: arenas are sized for the largest command).
var ErrArenaFull = errors.New("command arena full")

// IoctlCmd builds one RDMA_VERBS_IOCTL call: a header followed by attributes,
// all in arena memory, with attribute payloads and output buffers in the same
// arena. Errors while building are sticky and reported once by Exec, in the
// style of mdlayher/netlink's attribute encoder.
//
// The kernel writes results back into the attribute array (new handles and
// fds into Data, VALID_OUTPUT into Flags), so results are read from the
// builder after Exec, never from a copy.
type IoctlCmd struct {
	a     *Arena
	buf   []byte // header + MaxAttrs attributes
	attrs []abi.Attr
	n     int
	err   error
}

// NewIoctl starts a command for object/method on a device of driverID.
func NewIoctl(a *Arena, object, method uint16, driverID uint32) *IoctlCmd {
	c := &IoctlCmd{a: a}
	c.buf = a.Alloc(hdrSize + MaxAttrs*attrSize)
	if c.buf == nil {
		c.err = ErrArenaFull
		return c
	}
	h := c.hdr()
	h.ObjectID = object
	h.MethodID = method
	h.DriverID = driverID
	c.attrs = unsafe.Slice((*abi.Attr)(unsafe.Pointer(&c.buf[hdrSize])), MaxAttrs)
	return c
}

const (
	hdrSize  = int(unsafe.Sizeof(abi.IoctlHdr{}))
	attrSize = int(unsafe.Sizeof(abi.Attr{}))
)

// Bytes returns the command as it will be sent, header and attributes (for
// tests that compare it byte for byte).
func (c *IoctlCmd) Bytes() []byte {
	if c.buf == nil {
		return nil
	}
	*c.hdr() = c.Header()
	return c.buf[:hdrSize+c.n*attrSize]
}

func (c *IoctlCmd) hdr() *abi.IoctlHdr { return (*abi.IoctlHdr)(unsafe.Pointer(&c.buf[0])) }

// Err returns the sticky build error.
func (c *IoctlCmd) Err() error { return c.err }

func (c *IoctlCmd) add(id, length, flags uint16, data uint64) int {
	if c.err != nil {
		return -1
	}
	if c.n == MaxAttrs {
		c.err = fmt.Errorf("ioctl: more than %d attributes", MaxAttrs)
		return -1
	}
	for i := 0; i < c.n; i++ {
		if c.attrs[i].AttrID == id {
			c.err = fmt.Errorf("ioctl: attribute %#x given twice", id)
			return -1
		}
	}
	c.attrs[c.n] = abi.Attr{AttrID: id, Len: length, Flags: flags, Data: data}
	c.n++
	return c.n - 1
}

// PtrIn adds a PTR_IN attribute with payload p. Payloads of 8 bytes or less
// travel inline in the attribute (uverbs_attr_ptr_is_inline); larger ones are
// copied into the arena and passed by address.
func (c *IoctlCmd) PtrIn(id uint16, p []byte) int {
	if !c.checkLen(id, len(p)) {
		return -1
	}
	if len(p) <= 8 {
		var v [8]byte
		copy(v[:], p)
		return c.add(id, uint16(len(p)), abi.UVERBS_ATTR_F_MANDATORY, binary.LittleEndian.Uint64(v[:]))
	}
	b := c.alloc(len(p))
	if b == nil {
		return -1
	}
	copy(b, p)
	return c.add(id, uint16(len(p)), abi.UVERBS_ATTR_F_MANDATORY, Addr(b))
}

// PtrInArena adds a PTR_IN attribute whose payload already lives in arena
// memory (it is not copied). Payloads of 8 bytes or less still go inline.
// p must be arena memory: the type does not check it (see Buf).
func (c *IoctlCmd) PtrInArena(id uint16, p []byte) int {
	if !c.checkLen(id, len(p)) {
		return -1
	}
	if len(p) <= 8 {
		return c.PtrIn(id, p)
	}
	return c.add(id, uint16(len(p)), abi.UVERBS_ATTR_F_MANDATORY, Addr(p))
}

// U32 adds a 4-byte PTR_IN attribute (UVERBS_ATTR_TYPE(u32)).
func (c *IoctlCmd) U32(id uint16, v uint32) int {
	return c.add(id, 4, abi.UVERBS_ATTR_F_MANDATORY, uint64(v))
}

// U64 adds an 8-byte PTR_IN attribute (UVERBS_ATTR_TYPE(u64)).
func (c *IoctlCmd) U64(id uint16, v uint64) int {
	return c.add(id, 8, abi.UVERBS_ATTR_F_MANDATORY, v)
}

// Const adds a CONST_IN attribute: always 8 bytes inline.
func (c *IoctlCmd) Const(id uint16, v uint64) int { return c.U64(id, v) }

// PtrOut adds a PTR_OUT attribute with an n-byte arena buffer and returns the
// buffer the kernel will fill.
func (c *IoctlCmd) PtrOut(id uint16, n int) []byte {
	if !c.checkLen(id, n) {
		return nil
	}
	b := c.alloc(n)
	if b == nil {
		return nil
	}
	c.add(id, uint16(n), abi.UVERBS_ATTR_F_MANDATORY, Addr(b))
	return b
}

// PtrOutArena adds a PTR_OUT attribute over an existing arena buffer. b
// must be arena memory (the kernel writes it during Exec): the type does
// not check it (see Buf).
func (c *IoctlCmd) PtrOutArena(id uint16, b []byte) int {
	if !c.checkLen(id, len(b)) {
		return -1
	}
	return c.add(id, uint16(len(b)), abi.UVERBS_ATTR_F_MANDATORY, Addr(b))
}

// IDR adds an object-handle attribute.
func (c *IoctlCmd) IDR(id uint16, handle uint32) int {
	return c.add(id, 0, abi.UVERBS_ATTR_F_MANDATORY, uint64(handle))
}

// NewIDR adds the attribute through which a create method returns the new
// object's handle; read it with Data after Exec.
func (c *IoctlCmd) NewIDR(id uint16) int { return c.add(id, 0, abi.UVERBS_ATTR_F_MANDATORY, 0) }

// FD adds a file-descriptor attribute.
func (c *IoctlCmd) FD(id uint16, fd int) int {
	return c.add(id, 0, abi.UVERBS_ATTR_F_MANDATORY, uint64(int64(fd)))
}

// NewFD adds the attribute through which the kernel returns a new fd.
func (c *IoctlCmd) NewFD(id uint16) int { return c.add(id, 0, abi.UVERBS_ATTR_F_MANDATORY, 0) }

// Optional clears MANDATORY on attribute i, so an older kernel that does not
// know it ignores it instead of failing with EPROTONOSUPPORT.
func (c *IoctlCmd) Optional(i int) {
	if i >= 0 && i < c.n {
		c.attrs[i].Flags &^= abi.UVERBS_ATTR_F_MANDATORY
	}
}

// Data returns attribute i's data word as the kernel left it.
func (c *IoctlCmd) Data(i int) uint64 {
	if i < 0 || i >= c.n {
		return 0
	}
	return c.attrs[i].Data
}

// Valid reports whether the kernel wrote PTR_OUT attribute i.
func (c *IoctlCmd) Valid(i int) bool {
	return i >= 0 && i < c.n && c.attrs[i].Flags&abi.UVERBS_ATTR_F_VALID_OUTPUT != 0
}

// NumAttrs is the number of attributes added so far.
func (c *IoctlCmd) NumAttrs() int { return c.n }

// Attr returns a copy of attribute i (for tests).
func (c *IoctlCmd) Attr(i int) abi.Attr {
	if i < 0 || i >= c.n {
		return abi.Attr{}
	}
	return c.attrs[i]
}

// Header returns a copy of the header as it will be sent (for tests).
func (c *IoctlCmd) Header() abi.IoctlHdr {
	h := *c.hdr()
	h.NumAttrs = uint16(c.n)
	h.Length = uint16(hdrSize + c.n*attrSize)
	return h
}

func (c *IoctlCmd) alloc(n int) []byte {
	if c.err != nil {
		return nil
	}
	b := c.a.Alloc(n)
	if b == nil {
		c.err = ErrArenaFull
	}
	return b
}

// MaxAttrLen is the largest PTR_IN/PTR_OUT payload: struct
// ib_uverbs_attr's len is a u16.
const MaxAttrLen = 0xffff

// ErrAttrTooLong is wrapped by the build error of an attribute over MaxAttrLen.
var ErrAttrTooLong = errors.New("attribute payload over the 65535-byte limit of ib_uverbs_attr.len")

// checkLen makes an oversized (or negative) attribute a sticky error: the
// u16 len would otherwise silently truncate it and the kernel would read or
// write a different amount than the caller expects.
func (c *IoctlCmd) checkLen(id uint16, n int) bool {
	if n < 0 || n > MaxAttrLen {
		c.setErr(fmt.Errorf("ioctl: attribute %#x: %d bytes: %w", id, n, ErrAttrTooLong))
		return false
	}
	return true
}

func (c *IoctlCmd) setErr(err error) {
	if c.err == nil {
		c.err = err
	}
}

// Exec sends the command on fd.
func (c *IoctlCmd) Exec(fd *FD) error {
	if c.err != nil {
		return c.err
	}
	*c.hdr() = c.Header()
	return Ioctl(fd, abi.RDMA_VERBS_IOCTL, unsafe.Pointer(&c.buf[0]))
}
