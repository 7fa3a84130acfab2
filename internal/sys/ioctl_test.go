package sys

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/abi"
)

func newTestArena(t *testing.T, size int) *Arena {
	t.Helper()
	a, err := NewArena(size)
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	return a
}

// attrBytes is struct ib_uverbs_attr in its little-endian wire form.
func attrBytes(id, length, flags uint16, data uint64) []byte {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint16(b[0:], id)
	binary.LittleEndian.PutUint16(b[2:], length)
	binary.LittleEndian.PutUint16(b[4:], flags)
	binary.LittleEndian.PutUint64(b[8:], data)
	return b
}

func hdrBytes(length, object, method, nattrs uint16, driver uint32) []byte {
	b := make([]byte, 24)
	binary.LittleEndian.PutUint16(b[0:], length)
	binary.LittleEndian.PutUint16(b[2:], object)
	binary.LittleEndian.PutUint16(b[4:], method)
	binary.LittleEndian.PutUint16(b[6:], nattrs)
	binary.LittleEndian.PutUint32(b[16:], driver)
	return b
}

func TestIoctlEncoderBytes(t *testing.T) {
	a := newTestArena(t, 4096)
	c := NewIoctl(a, 3, 7, 14)
	const M = abi.UVERBS_ATTR_F_MANDATORY
	i0 := c.NewIDR(0x10)
	c.IDR(0x11, 0x1234)
	c.U32(0x12, 0xdeadbeef)
	c.U64(0x13, 0x0102030405060708)
	c.PtrIn(0x14, []byte{1, 2, 3})                // inline, zero padded
	c.PtrIn(0x15, []byte{1, 2, 3, 4, 5, 6, 7, 8}) // 8 bytes: still inline
	big := []byte{9, 8, 7, 6, 5, 4, 3, 2, 1}      // 9 bytes: copied, by address
	i6 := c.PtrIn(0x16, big)
	out := c.PtrOut(0x17, 12)
	c.FD(0x18, -1)
	c.NewFD(0x19)
	c.Const(0x1a, 5)
	require.NoError(t, c.Err())
	require.Equal(t, 0, i0)
	require.Equal(t, 11, c.NumAttrs())

	want := hdrBytes(uint16(24+11*16), 3, 7, 11, 14)
	want = append(want, attrBytes(0x10, 0, M, 0)...)
	want = append(want, attrBytes(0x11, 0, M, 0x1234)...)
	want = append(want, attrBytes(0x12, 4, M, 0xdeadbeef)...)
	want = append(want, attrBytes(0x13, 8, M, 0x0102030405060708)...)
	want = append(want, attrBytes(0x14, 3, M, 0x030201)...)
	want = append(want, attrBytes(0x15, 8, M, 0x0807060504030201)...)
	want = append(want, attrBytes(0x16, 9, M, c.Attr(i6).Data)...)
	want = append(want, attrBytes(0x17, 12, M, Addr(out))...)
	want = append(want, attrBytes(0x18, 0, M, 0xffffffffffffffff)...)
	want = append(want, attrBytes(0x19, 0, M, 0)...)
	want = append(want, attrBytes(0x1a, 8, M, 5)...)
	require.Equal(t, want, c.Bytes())

	// The by-address payload is a copy in the arena, not the caller's slice.
	p := c.Attr(i6).Data
	require.NotEqual(t, Addr(big), p)
	require.GreaterOrEqual(t, p, Addr(a.mem))
	require.Less(t, p, Addr(a.mem)+uint64(len(a.mem)))
	off := int(p - Addr(a.mem))
	require.Equal(t, big, a.mem[off:off+9])
	require.Len(t, out, 12)
}

func TestIoctlOptionalClearsMandatory(t *testing.T) {
	a := newTestArena(t, 4096)
	c := NewIoctl(a, 1, 2, 0)
	i := c.U32(5, 1)
	c.Optional(i)
	c.Optional(99) // out of range: ignored
	c.Optional(-1)
	require.Equal(t, uint16(0), c.Attr(i).Flags)
	require.Equal(t, attrBytes(5, 4, 0, 1), c.Bytes()[24:40])
}

func TestIoctlStickyErrors(t *testing.T) {
	a := newTestArena(t, 4096)
	t.Run("duplicate id", func(t *testing.T) {
		a.Reset()
		c := NewIoctl(a, 1, 2, 0)
		c.U32(5, 1)
		require.Equal(t, -1, c.U32(5, 2))
		require.ErrorContains(t, c.Err(), "given twice")
		// Sticky: later good attributes do not clear it and are not added.
		require.Equal(t, -1, c.U32(6, 1))
		require.Equal(t, 1, c.NumAttrs())
		require.ErrorContains(t, c.Exec(nil), "given twice")
	})
	t.Run("too many", func(t *testing.T) {
		a.Reset()
		c := NewIoctl(a, 1, 2, 0)
		for i := 0; i < MaxAttrs; i++ {
			require.Equal(t, i, c.U32(uint16(i), 0))
		}
		require.Equal(t, -1, c.U32(MaxAttrs, 0))
		require.ErrorContains(t, c.Err(), "more than")
	})
	t.Run("arena full", func(t *testing.T) {
		small := newTestArena(t, 1) // one page
		c := NewIoctl(small, 1, 2, 0)
		require.NoError(t, c.Err())
		require.Nil(t, c.PtrOut(1, Pagesize))
		require.ErrorIs(t, c.Err(), ErrArenaFull)
	})
	t.Run("first error wins", func(t *testing.T) {
		a.Reset()
		c := NewIoctl(a, 1, 2, 0)
		c.PtrOut(1, MaxAttrLen+1)
		c.U32(2, 0)
		c.U32(2, 0)
		require.ErrorIs(t, c.Err(), ErrAttrTooLong)
	})
}

// Defect 9: a PTR_OUT of more than 65535 bytes was silently truncated to
// its low 16 bits (a GID table over 2047 entries of 32 bytes).
func TestPtrOutRejectsOverU16(t *testing.T) {
	a := newTestArena(t, 256<<10)
	const gidEntry = 32
	for _, entries := range []int{2047, 2048, 4096} {
		a.Reset()
		c := NewIoctl(a, 1, 2, 0)
		b := c.PtrOut(1, entries*gidEntry)
		if entries*gidEntry <= MaxAttrLen {
			require.NoError(t, c.Err(), "%d entries", entries)
			require.Len(t, b, entries*gidEntry)
			require.Equal(t, uint16(entries*gidEntry), c.Attr(0).Len)
			continue
		}
		require.Nil(t, b)
		require.ErrorIs(t, c.Err(), ErrAttrTooLong, "%d entries", entries)
		require.ErrorContains(t, c.Err(), "attribute 0x1")
		require.Equal(t, 0, c.NumAttrs())
	}
	a.Reset()
	c := NewIoctl(a, 1, 2, 0)
	require.Equal(t, -1, c.PtrOutArena(3, a.Alloc(MaxAttrLen+1)))
	require.ErrorIs(t, c.Err(), ErrAttrTooLong)
	a.Reset()
	c = NewIoctl(a, 1, 2, 0)
	require.Equal(t, -1, c.PtrIn(3, make([]byte, MaxAttrLen+1)))
	require.ErrorIs(t, c.Err(), ErrAttrTooLong)
}

func TestIoctlValidAndData(t *testing.T) {
	a := newTestArena(t, 4096)
	c := NewIoctl(a, 1, 2, 0)
	i := c.NewIDR(1)
	j := c.PtrOut(2, 4)
	_ = j
	// Simulate the kernel writing results back in place.
	c.attrs[0].Data = 77
	c.attrs[1].Flags |= abi.UVERBS_ATTR_F_VALID_OUTPUT
	require.Equal(t, uint64(77), c.Data(i))
	require.True(t, c.Valid(1))
	require.False(t, c.Valid(0))
	require.False(t, c.Valid(5))
	require.Equal(t, uint64(0), c.Data(9))
}

func TestArena(t *testing.T) {
	a := newTestArena(t, 100)
	require.Equal(t, Pagesize, a.Size(), "rounded up to a page")
	b := a.Alloc(3)
	require.Len(t, b, 3)
	require.Equal(t, 3, cap(b), "capped: an append cannot run into the next allocation")
	for i := range b {
		b[i] = 0xff
	}
	c := a.Alloc(5)
	require.Equal(t, uint64(0), Addr(c)%8, "8-byte aligned")
	require.Equal(t, Addr(b)+8, Addr(c))
	require.Equal(t, 13, a.Used())
	a.Reset()
	require.Equal(t, 0, a.Used())
	d := a.Alloc(8)
	require.Equal(t, Addr(b), Addr(d), "reset reuses the memory")
	require.Equal(t, make([]byte, 8), d, "reused memory comes back zeroed")
	require.Nil(t, a.Alloc(Pagesize), "full")
	require.Nil(t, a.Alloc(-1))
	rest := a.Alloc(Pagesize - 8)
	require.Len(t, rest, Pagesize-8, "exactly full fits")
	_, ok := a.AllocBuf(1)
	require.False(t, ok)
	a.Reset()
	bb, ok := a.AllocBuf(16)
	require.True(t, ok)
	require.Equal(t, 16, bb.Len())
	require.NoError(t, a.Close())
	require.NoError(t, a.Close(), "idempotent")
	require.Nil(t, a.Alloc(1), "closed arena allocates nothing")
	_, err := NewArena(0)
	require.Error(t, err)
}

func TestErrno(t *testing.T) {
	err := NewErrno(EOPNOTSUPP)
	require.ErrorIs(t, err, ErrNotSupported)
	require.ErrorIs(t, err, EOPNOTSUPP)
	require.NotErrorIs(t, NewErrno(EINVAL), ErrNotSupported)
	require.Nil(t, NewErrno(0))
	require.Equal(t, EBUSY, ErrnoOf(errors.Join(errors.New("x"), NewErrno(EBUSY))))
	require.ErrorIs(t, ErrNotSupportedOnOS, ErrNotSupported)
}
