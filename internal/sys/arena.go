package sys

import (
	"fmt"
)

// Arena is a bump allocator over one anonymous mapping. Memory whose address
// is written into a kernel command (ioctl attribute payloads, response
// buffers, write() command bodies) comes from an Arena, so the Go runtime
// never moves or frees it while the kernel looks at it.
//
// An Arena is not safe for concurrent use; owners serialise with a mutex.
type Arena struct {
	mem []byte
	off int
}

// Buf is a byte range of an Arena. Write takes a Buf rather than
// a []byte, so the type proves that the command body the kernel reads is
// arena memory, never Go heap or stack. It proves nothing about the
// addresses written inside that body: the response buffers a command points
// at (WriteCommand.CoreOut/UHWOut, the IoctlCmd.PtrInArena and PtrOutArena
// payloads) are plain []byte, and that they are arena memory is the
// caller's contract, stated on each and not checked. A Buf is only made by
// Arena.AllocBuf.
type Buf struct{ b []byte }

// Bytes is the memory of the Buf (to fill in a command).
func (b Buf) Bytes() []byte { return b.b }

// Len is the Buf's length.
func (b Buf) Len() int { return len(b.b) }

// NewArena maps size bytes (rounded up to a page).
func NewArena(size int) (*Arena, error) {
	if size <= 0 {
		return nil, fmt.Errorf("command arena: size %d must be positive", size)
	}
	size = (size + Pagesize - 1) &^ (Pagesize - 1)
	m, err := MmapAnon(size, 0)
	if err != nil {
		return nil, fmt.Errorf("map %d-byte command arena: %w", size, err)
	}
	return &Arena{mem: m}, nil
}

// Alloc returns n zeroed bytes aligned to 8, or nil when the arena is full
// (or closed, or n is negative).
func (a *Arena) Alloc(n int) []byte {
	off := (a.off + 7) &^ 7
	if n < 0 || off+n > len(a.mem) {
		return nil
	}
	b := a.mem[off : off+n : off+n]
	clear(b)
	a.off = off + n
	return b
}

// AllocBuf is Alloc returning a Buf; ok is false when the arena is full.
func (a *Arena) AllocBuf(n int) (b Buf, ok bool) {
	m := a.Alloc(n)
	return Buf{m}, m != nil
}

// Size is the arena's capacity in bytes; Used how much is allocated.
func (a *Arena) Size() int { return len(a.mem) }
func (a *Arena) Used() int { return a.off }

// Reset releases every allocation.
func (a *Arena) Reset() { a.off = 0 }

// Close unmaps the arena. Nothing allocated from it may be used afterwards.
// Close is idempotent.
func (a *Arena) Close() error {
	if a == nil || a.mem == nil {
		return nil
	}
	err := Munmap(a.mem)
	a.mem = nil
	a.off = 0
	return err
}
