package logbuffer

import (
	"errors"
	"fmt"

	"github.com/ibgo/ibgo/internal/shm"
)

// LogBuffer is a log: three term partitions at the start and the metadata
// section at the end (the file may be longer than 3 terms + 4 KiB when
// rounded up to a large page size).
type LogBuffer struct {
	buf     []byte
	terms   [PartitionCount][]byte
	meta    *Metadata
	mapping *shm.Mapping
}

// Wrap maps an existing log held in b: the term length and page size come
// from the metadata, as aeron_raw_log_map_existing reads them, and are
// checked against the length of b.
func Wrap(b []byte) (*LogBuffer, error) {
	if len(b) < MetadataLength {
		return nil, fmt.Errorf("logbuffer: %d bytes cannot hold the %d-byte metadata section", len(b), MetadataLength)
	}
	meta, err := NewMetadata(b[len(b)-MetadataLength:])
	if err != nil {
		return nil, err
	}
	termLength := int64(meta.TermLength())
	if err := CheckTermLength(termLength); err != nil {
		return nil, fmt.Errorf("logbuffer: metadata invalid: %w", err)
	}
	if err := CheckPageSize(int64(meta.PageSize())); err != nil {
		return nil, fmt.Errorf("logbuffer: metadata invalid: %w", err)
	}
	if need := termLength*PartitionCount + MetadataLength; int64(len(b)) < need {
		return nil, fmt.Errorf("logbuffer: %d bytes is less than 3 terms of %d plus metadata (%d)", len(b), termLength, need)
	}
	return newLog(b, int(termLength), meta)
}

// New formats b as a new, empty log: it records the term length and page
// size in the metadata and leaves everything else zero for the driver to
// fill in. b must be at least ComputeLogLength bytes and 8-byte aligned.
func New(b []byte, termLength, pageSize int32) (*LogBuffer, error) {
	if err := CheckTermLength(int64(termLength)); err != nil {
		return nil, err
	}
	if err := CheckPageSize(int64(pageSize)); err != nil {
		return nil, err
	}
	need := ComputeLogLength(int64(termLength), int64(pageSize))
	if int64(len(b)) < need {
		return nil, fmt.Errorf("logbuffer: %d bytes is less than the %d a log of %d-byte terms needs", len(b), need, termLength)
	}
	meta, err := NewMetadata(b[len(b)-MetadataLength:])
	if err != nil {
		return nil, err
	}
	meta.SetTermLength(termLength)
	meta.SetPageSize(pageSize)
	return newLog(b, int(termLength), meta)
}

func newLog(b []byte, termLength int, meta *Metadata) (*LogBuffer, error) {
	if !shm.Aligned(b, 8) {
		return nil, errors.New("logbuffer: buffer must be 8-byte aligned for atomic access")
	}
	l := &LogBuffer{buf: b, meta: meta}
	for i := range l.terms {
		l.terms[i] = b[i*termLength : (i+1)*termLength : (i+1)*termLength]
	}
	return l, nil
}

// Open maps an existing log file.
func Open(path string, writable bool) (*LogBuffer, error) {
	m, err := shm.Map(path, writable)
	if err != nil {
		return nil, fmt.Errorf("logbuffer: %w", err)
	}
	l, err := Wrap(m.Bytes())
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	l.mapping = m
	return l, nil
}

// Create creates a log file of ComputeLogLength bytes and formats it. The
// file is sparse (shm.Create); CreateAllocated reserves its blocks.
func Create(path string, termLength, pageSize int32) (*LogBuffer, error) {
	return create(path, termLength, pageSize, false)
}

// CreateAllocated is Create with the file's blocks reserved
// (shm.CreateAllocated): a full file system is an error here rather than a
// SIGBUS at a later write. The driver's logs that are not sparse use it.
func CreateAllocated(path string, termLength, pageSize int32) (*LogBuffer, error) {
	return create(path, termLength, pageSize, true)
}

func create(path string, termLength, pageSize int32, allocate bool) (*LogBuffer, error) {
	if err := CheckTermLength(int64(termLength)); err != nil {
		return nil, err
	}
	if err := CheckPageSize(int64(pageSize)); err != nil {
		return nil, err
	}
	mk := shm.Create
	if allocate {
		mk = shm.CreateAllocated
	}
	m, err := mk(path, ComputeLogLength(int64(termLength), int64(pageSize)))
	if err != nil {
		return nil, fmt.Errorf("logbuffer: %w", err)
	}
	l, err := New(m.Bytes(), termLength, pageSize)
	if err != nil {
		m.Close()
		return nil, err
	}
	l.mapping = m
	return l, nil
}

// Close unmaps a log opened with Open or Create; it is idempotent and a
// no-op for wrapped memory.
func (l *LogBuffer) Close() error {
	m := l.mapping
	l.mapping = nil
	return m.Close()
}

// Term returns partition i (0, 1 or 2).
func (l *LogBuffer) Term(i int) []byte { return l.terms[i] }

// Metadata returns the metadata section.
func (l *LogBuffer) Metadata() *Metadata { return l.meta }

// TermLength is the length of each partition.
func (l *LogBuffer) TermLength() int32 { return int32(len(l.terms[0])) }

// PreTouch makes every page of a mapped log present and written now
// (shm.PreTouch), as Aeron's clients do with pre-touch on, in chunks of
// PreTouchChunk bytes with between (when not nil) run after each, so that
// a caller can keep a heartbeat going through a large log; a log not
// mapped from a file is left alone. Not for concurrent use with Close.
func (l *LogBuffer) PreTouch(between func()) error {
	if l.mapping == nil {
		return nil
	}
	b := l.mapping.Bytes()
	for off := 0; off < len(b); off += PreTouchChunk {
		if err := shm.PreTouch(b[off:min(off+PreTouchChunk, len(b))]); err != nil {
			return fmt.Errorf("logbuffer: %s: %w", l.mapping.Path(), err)
		}
		if between != nil {
			between()
		}
	}
	return nil
}

// PreTouchChunk is how much of a log PreTouch touches between two calls
// of its between function: a multiple of every page size.
const PreTouchChunk = 16 << 20

// Bytes is the whole log.
func (l *LogBuffer) Bytes() []byte { return l.buf }
