//go:build !unix

package shm

import (
	"errors"
	"fmt"
)

// ErrNotSupportedOnOS is returned by Map and Create where ibgo has no mmap.
var ErrNotSupportedOnOS = errors.New("shm: memory-mapped files are not supported on this OS")

// Mapping is a file mapped into memory.
type Mapping struct {
	path string
	data []byte
}

// Map is not supported on this OS.
func Map(path string, writable bool) (*Mapping, error) {
	return nil, fmt.Errorf("map %s: %w", path, ErrNotSupportedOnOS)
}

// Create is not supported on this OS.
func Create(path string, size int64) (*Mapping, error) {
	return nil, fmt.Errorf("create %s: %w", path, ErrNotSupportedOnOS)
}

// Bytes returns the mapped memory.
func (m *Mapping) Bytes() []byte { return m.data }

// Path returns the mapped file's path.
func (m *Mapping) Path() string { return m.path }

// PreTouch is a no-op.
func (m *Mapping) PreTouch() error { return nil }

// PreTouch is a no-op.
func PreTouch(b []byte) error { return nil }

// Close is a no-op.
func (m *Mapping) Close() error { return nil }

// CreateAllocated is not supported on this OS.
func CreateAllocated(path string, size int64) (*Mapping, error) { return Create(path, size) }
