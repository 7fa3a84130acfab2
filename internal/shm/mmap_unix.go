//go:build unix

package shm

import (
	"errors"
	"fmt"
	"os"

	"github.com/ibgo/ibgo/internal/sys"
)

// Mapping is a file mapped into memory with MAP_SHARED, as Aeron maps
// cnc.dat, log buffers and loss-report.dat.
type Mapping struct {
	path string
	data []byte
}

// Map maps the whole of an existing file. Read-only mappings are enough for
// inspection tools; writable ones are for the driver and clients.
func Map(path string, writable bool) (*Mapping, error) {
	flag := os.O_RDONLY
	if writable {
		flag = os.O_RDWR
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return mapFile(f, path, st.Size(), writable)
}

// Create creates (or truncates) path with the given size and maps it
// writable. The new file reads as zeros. It is sparse: its blocks are
// taken as its pages are first written (a write the file system has no
// room for then is a SIGBUS); CreateAllocated reserves them.
func Create(path string, size int64) (*Mapping, error) { return create(path, size, false) }

// CreateAllocated is Create with the file's blocks reserved first
// (sys.Allocate): a file system without room fails here, with ENOSPC,
// instead of killing the process at a later write.
func CreateAllocated(path string, size int64) (*Mapping, error) { return create(path, size, true) }

func create(path string, size int64, allocate bool) (*Mapping, error) {
	if size <= 0 {
		return nil, fmt.Errorf("shm: create %s: size %d must be positive", path, size)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return nil, fmt.Errorf("shm: create %s: %w", path, err)
	}
	if allocate {
		if err := sys.Allocate(f, size); err != nil {
			os.Remove(path) // the deferred Close closes it
			return nil, fmt.Errorf("shm: create %s: reserve %d bytes: %w", path, size, err)
		}
	}
	return mapFile(f, path, size, true)
}

func mapFile(f *os.File, path string, size int64, writable bool) (*Mapping, error) {
	if size <= 0 {
		return nil, fmt.Errorf("shm: map %s: file is empty", path)
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("shm: map %s: %d bytes do not fit the address space", path, size)
	}
	data, err := sys.MapFile(f, int(size), writable)
	if err != nil {
		return nil, fmt.Errorf("shm: mmap %s: %w", path, err)
	}
	return &Mapping{path: path, data: data}, nil
}

// PreTouch makes every page of b, a page-aligned part of a shared
// mapping, present and written now, so that a hot loop never stalls on a
// first touch later: MADV_POPULATE_WRITE takes the kernel's page faults
// at once, then a compare-and-swap of 0 with 0 on each page's first word
// writes each page, as Aeron's Java client pre-touches a log. The write
// matters: in a VM a page's first write can also stall below the guest,
// which populating alone does not take (measured in docs/perf.md). The
// swap changes no data, so it is safe on a log other processes write.
//
// A kernel without MADV_POPULATE_WRITE (EINVAL, before Linux 5.14) leaves
// the faults to the swap loop. Any other failure to populate (a file
// system with no room for a sparse file's pages) is returned before the
// loop, which would otherwise die of SIGBUS at the first page without
// room.
func PreTouch(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if _, err := sys.PopulateWrite(b); err != nil {
		return fmt.Errorf("shm: pre-touch %d bytes: %w", len(b), err)
	}
	preTouch(b)
	return nil
}

// PreTouch is PreTouch over the whole mapping. Not for concurrent use
// with Close.
func (m *Mapping) PreTouch() error {
	if err := PreTouch(m.data); err != nil {
		return fmt.Errorf("%s: %w", m.path, err)
	}
	return nil
}

// Bytes returns the mapped memory. It is invalid after Close.
func (m *Mapping) Bytes() []byte { return m.data }

// Path returns the mapped file's path.
func (m *Mapping) Path() string { return m.path }

// Close unmaps the file. It is idempotent.
func (m *Mapping) Close() error {
	if m == nil || m.data == nil {
		return nil
	}
	data := m.data
	m.data = nil
	if err := sys.Munmap(data); err != nil {
		return errors.Join(fmt.Errorf("shm: munmap %s", m.path), err)
	}
	return nil
}
