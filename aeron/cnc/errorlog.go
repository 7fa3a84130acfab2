package cnc

import (
	"sync"

	"github.com/ibgo/ibgo/internal/shm"
)

// Distinct error log layout (aeron_error_log_entry_t): a 24-byte header,
// then the text, each entry aligned to 8.
const (
	ErrorLogHeaderLength    = 24
	ErrorLogRecordAlignment = 8
	elLengthOffset          = 0
	elCountOffset           = 4
	elLastOffset            = 8
	elFirstOffset           = 16
)

// Observation is one distinct error and how often it was seen.
type Observation struct {
	Count          int32
	FirstTimestamp int64 // epoch ms
	LastTimestamp  int64 // epoch ms
	Text           string
}

// ReadErrorLog calls fn for each entry observed at or after since (epoch
// ms; 0 for all) and returns the number of such entries (mirrors
// aeron_error_log_read). A length that breaks the layout ends the read with
// an error after the entries before it.
func ReadErrorLog(b []byte, since int64, fn func(Observation)) (int, error) {
	if !shm.Aligned(b, 8) {
		return 0, invalid("read error log", "buffer not 8-byte aligned")
	}
	n := 0
	for off := 0; off+ErrorLogHeaderLength <= len(b); {
		length := int(shm.LoadInt32(b, off+elLengthOffset))
		if length == 0 {
			break
		}
		if length < ErrorLogHeaderLength || length > len(b)-off {
			return n, corrupt("read error log", int64(off), "entry length %d does not fit the %d bytes left", length, len(b)-off)
		}
		last := shm.LoadInt64(b, off+elLastOffset)
		if last >= since {
			n++
			fn(Observation{
				Count:          shm.LoadInt32(b, off+elCountOffset),
				FirstTimestamp: int64(le.Uint64(b[off+elFirstOffset:])),
				LastTimestamp:  last,
				Text:           string(b[off+ErrorLogHeaderLength : off+length]),
			})
		}
		off += align8(length)
	}
	return n, nil
}

// DistinctErrorLog records errors into the log, one entry per distinct
// (code, description), counting repeats (aeron_distinct_error_log.c). It is
// safe for concurrent use within a process.
type DistinctErrorLog struct {
	mu      sync.Mutex
	buf     []byte
	next    int
	entries []errorEntry
	clock   func() int64
}

type errorEntry struct {
	code   int
	desc   string
	offset int
}

// NewDistinctErrorLog writes into b (zeroed); clock returns epoch ms.
func NewDistinctErrorLog(b []byte, clock func() int64) (*DistinctErrorLog, error) {
	if !shm.Aligned(b, 8) {
		return nil, invalid("error log", "buffer not 8-byte aligned")
	}
	return &DistinctErrorLog{buf: b, clock: clock}, nil
}

// Record counts an observation of an error. It fails with
// ErrInsufficientCapacity when a new distinct error does not fit.
func (l *DistinctErrorLog) Record(code int, description string) error {
	l.mu.Lock()
	now := l.clock()
	off := -1
	for _, e := range l.entries {
		if e.code == code && e.desc == description {
			off = e.offset
			break
		}
	}
	if off < 0 {
		length := ErrorLogHeaderLength + len(description)
		if l.next+length > len(l.buf) {
			l.mu.Unlock()
			return ErrInsufficientCapacity
		}
		off = l.next
		copy(l.buf[off+ErrorLogHeaderLength:], description)
		le.PutUint64(l.buf[off+elFirstOffset:], uint64(now))
		shm.StoreInt32(l.buf, off+elCountOffset, 0)
		l.next = align8(off + length)
		l.entries = append(l.entries, errorEntry{code, description, off})
		shm.StoreInt32(l.buf, off+elLengthOffset, int32(length))
	}
	l.mu.Unlock()
	shm.AddInt32(l.buf, off+elCountOffset, 1)
	shm.StoreInt64(l.buf, off+elLastOffset, now)
	return nil
}
