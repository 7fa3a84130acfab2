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

// NewArena maps size bytes (rounded up to a page).
func NewArena(size int) (*Arena, error) {
	size = (size + Pagesize - 1) &^ (Pagesize - 1)
	m, err := MmapAnon(size, 0)
	if err != nil {
		return nil, fmt.Errorf("map %d-byte command arena: %w", size, err)
	}
	return &Arena{mem: m}, nil
}

// Alloc returns n zeroed bytes aligned to 8, or nil when the arena is full.
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

// Reset releases every allocation.
func (a *Arena) Reset() { a.off = 0 }

// Close unmaps the arena. Nothing allocated from it may be used afterwards.
func (a *Arena) Close() error {
	if a == nil || a.mem == nil {
		return nil
	}
	err := Munmap(a.mem)
	a.mem = nil
	a.off = 0
	return err
}
