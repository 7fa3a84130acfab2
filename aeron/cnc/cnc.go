package cnc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ibgo/ibgo/internal/shm"
)

var le = binary.LittleEndian

// File names in the Aeron directory.
const (
	FileName           = "cnc.dat"
	LossReportFileName = "loss-report.dat"
)

// Header layout (aeron_cnc_metadata_t, packed to 4, padded to 128 bytes).
const (
	HeaderLength                      = 128 // AERON_CNC_VERSION_AND_META_DATA_LENGTH
	VersionOffset                     = 0
	ToDriverBufferLengthOffset        = 4
	ToClientsBufferLengthOffset       = 8
	CounterMetadataBufferLengthOffset = 12
	CounterValuesBufferLengthOffset   = 16
	ErrorLogBufferLengthOffset        = 20
	ClientLivenessTimeoutOffset       = 24
	StartTimestampOffset              = 32
	PIDOffset                         = 40
	FilePageSizeOffset                = 48 // Aeron 1.53; 0 in files written by 1.48
)

// SemanticVersion is Aeron's (major << 16) | (minor << 8) | patch.
type SemanticVersion int32

// ComposeSemanticVersion mirrors aeron_semantic_version_compose.
func ComposeSemanticVersion(major, minor, patch uint8) SemanticVersion {
	return SemanticVersion(int32(major)<<16 | int32(minor)<<8 | int32(patch))
}

func (v SemanticVersion) Major() uint8 { return uint8(v >> 16) }
func (v SemanticVersion) Minor() uint8 { return uint8(v >> 8) }
func (v SemanticVersion) Patch() uint8 { return uint8(v) }

func (v SemanticVersion) String() string {
	return fmt.Sprintf("%d.%d.%d", v.Major(), v.Minor(), v.Patch())
}

// Version is the CnC version Aeron 1.48 through 1.53 write: 0.2.0.
var Version = ComposeSemanticVersion(0, 2, 0)

// Default buffer sizes of the Aeron C driver.
const (
	DefaultToDriverCapacity   = 1 << 20
	DefaultToClientsCapacity  = 1 << 20
	DefaultCounterValues      = 1 << 20
	DefaultErrorLogLength     = 1 << 20
	DefaultLossReportLength   = 1 << 20
	DefaultClientLiveness     = 10 * time.Second
	DefaultFreeToReuseTimeout = time.Second
)

// Layout describes a CnC file to create.
type Layout struct {
	ToDriverCapacity      int // ring buffer data capacity, a power of two
	ToClientsCapacity     int // broadcast data capacity, a power of two
	CounterValuesLength   int // a multiple of 128; metadata is four times this
	ErrorLogLength        int
	ClientLivenessTimeout time.Duration
	StartTimestamp        time.Time
	PID                   int64
	FilePageSize          int // rounds the file length up; 4096 if 0
}

// DefaultLayout is the C driver's default layout.
func DefaultLayout() Layout {
	return Layout{
		ToDriverCapacity:      DefaultToDriverCapacity,
		ToClientsCapacity:     DefaultToClientsCapacity,
		CounterValuesLength:   DefaultCounterValues,
		ErrorLogLength:        DefaultErrorLogLength,
		ClientLivenessTimeout: DefaultClientLiveness,
		StartTimestamp:        time.Now(),
		PID:                   int64(os.Getpid()),
		FilePageSize:          4096,
	}
}

func (l Layout) pageSize() int {
	if l.FilePageSize <= 0 {
		return 4096
	}
	return l.FilePageSize
}

// Length is the file length for the layout (aeron_cnc_computed_length).
func (l Layout) Length() int {
	n := HeaderLength + l.ToDriverCapacity + RingBufferTrailerLength + l.ToClientsCapacity +
		BroadcastTrailerLength + 4*l.CounterValuesLength + l.CounterValuesLength + l.ErrorLogLength
	p := l.pageSize()
	return (n + p - 1) &^ (p - 1)
}

func (l Layout) validate() error {
	switch {
	case !powerOfTwo(l.ToDriverCapacity):
		return invalid("create", "to-driver capacity %d is not a power of two", l.ToDriverCapacity)
	case !powerOfTwo(l.ToClientsCapacity):
		return invalid("create", "to-clients capacity %d is not a power of two", l.ToClientsCapacity)
	case l.CounterValuesLength <= 0 || l.CounterValuesLength%CounterValueLength != 0:
		return invalid("create", "counter values length %d is not a positive multiple of %d", l.CounterValuesLength, CounterValueLength)
	case l.ErrorLogLength < 0 || l.ErrorLogLength%8 != 0:
		return invalid("create", "error log length %d is not a non-negative multiple of 8", l.ErrorLogLength)
	case !powerOfTwo(l.pageSize()):
		return invalid("create", "file page size %d is not a power of two", l.FilePageSize)
	}
	return nil
}

func powerOfTwo(n int) bool { return n > 0 && n&(n-1) == 0 }

// File is a mapped or in-memory CnC file.
type File struct {
	buf     []byte
	mapping *shm.Mapping
	path    string

	toDriver, toClients, countersMeta, countersValues, errorLog []byte
}

// Wrap validates the header of the CnC file in b and locates its buffers.
// A version of 0 is ErrNotReady; a major version other than 0 is
// ErrIncompatible.
func Wrap(b []byte) (*File, error) {
	return wrap(b, "")
}

func wrap(b []byte, path string) (*File, error) {
	fail := func(off int64, format string, args ...any) error {
		return &Error{Op: "read", Path: path, Offset: off, Reason: fmt.Sprintf(format, args...), Err: ErrCorrupt}
	}
	if len(b) < HeaderLength {
		return nil, fail(-1, "%d bytes, shorter than the %d-byte CnC header", len(b), HeaderLength)
	}
	if !shm.Aligned(b, 8) {
		return nil, &Error{Op: "read", Path: path, Offset: -1, Reason: "buffer not 8-byte aligned", Err: ErrInvalidArgument}
	}
	v := SemanticVersion(shm.LoadInt32(b, VersionOffset))
	if v == 0 {
		return nil, &Error{Op: "read", Path: path, Offset: -1, Err: ErrNotReady}
	}
	if v.Major() != Version.Major() {
		return nil, &Error{Op: "read", Path: path, Offset: VersionOffset,
			Reason: fmt.Sprintf("CnC version not compatible: app=%s file=%s", Version, v), Err: ErrIncompatible}
	}
	var lens [5]int64
	names := [5]string{"to_driver_buffer_length", "to_clients_buffer_length", "counter_metadata_buffer_length", "counter_values_buffer_length", "error_log_buffer_length"}
	total := int64(HeaderLength)
	for i := range lens {
		off := int64(ToDriverBufferLengthOffset + 4*i)
		lens[i] = int64(int32(le.Uint32(b[off:])))
		if lens[i] < 0 || lens[i]%8 != 0 {
			return nil, fail(off, "%s %d is not a non-negative multiple of 8", names[i], lens[i])
		}
		total += lens[i]
	}
	if total > int64(len(b)) {
		return nil, fail(-1, "header describes %d bytes of buffers, file has %d", total, len(b))
	}
	if c := lens[0] - RingBufferTrailerLength; !powerOfTwo(int(c)) {
		return nil, fail(ToDriverBufferLengthOffset, "to-driver buffer length %d is not a power of two plus the %d-byte trailer", lens[0], RingBufferTrailerLength)
	}
	if c := lens[1] - BroadcastTrailerLength; !powerOfTwo(int(c)) {
		return nil, fail(ToClientsBufferLengthOffset, "to-clients buffer length %d is not a power of two plus the %d-byte trailer", lens[1], BroadcastTrailerLength)
	}
	if lens[3]%CounterValueLength != 0 || lens[2] < lens[3]*(CounterMetadataLength/CounterValueLength) {
		return nil, fail(CounterMetadataBufferLengthOffset, "counters metadata %d and values %d do not describe whole counters", lens[2], lens[3])
	}
	f := &File{buf: b, path: path}
	off := int64(HeaderLength)
	bufs := [5]*[]byte{&f.toDriver, &f.toClients, &f.countersMeta, &f.countersValues, &f.errorLog}
	for i, p := range bufs {
		*p = b[off : off+lens[i] : off+lens[i]]
		off += lens[i]
	}
	return f, nil
}

// Init formats b (at least layout.Length() bytes, zeroed, 8-byte aligned)
// as a CnC file and, last, publishes the version: clients spin until it is
// non-zero (aeron_cnc_version_signal_cnc_ready).
func Init(b []byte, layout Layout) (*File, error) {
	if err := layout.validate(); err != nil {
		return nil, err
	}
	if len(b) < layout.Length() {
		return nil, invalid("create", "%d bytes is less than the %d the layout needs", len(b), layout.Length())
	}
	if !shm.Aligned(b, 8) {
		return nil, invalid("create", "buffer not 8-byte aligned")
	}
	le.PutUint32(b[ToDriverBufferLengthOffset:], uint32(layout.ToDriverCapacity+RingBufferTrailerLength))
	le.PutUint32(b[ToClientsBufferLengthOffset:], uint32(layout.ToClientsCapacity+BroadcastTrailerLength))
	le.PutUint32(b[CounterMetadataBufferLengthOffset:], uint32(4*layout.CounterValuesLength))
	le.PutUint32(b[CounterValuesBufferLengthOffset:], uint32(layout.CounterValuesLength))
	le.PutUint32(b[ErrorLogBufferLengthOffset:], uint32(layout.ErrorLogLength))
	le.PutUint64(b[ClientLivenessTimeoutOffset:], uint64(layout.ClientLivenessTimeout.Nanoseconds()))
	le.PutUint64(b[StartTimestampOffset:], uint64(layout.StartTimestamp.UnixMilli()))
	le.PutUint64(b[PIDOffset:], uint64(layout.PID))
	le.PutUint32(b[FilePageSizeOffset:], uint32(layout.pageSize()))
	shm.StoreInt32(b, VersionOffset, int32(Version))
	return Wrap(b)
}

// Path returns the default CnC path in an Aeron directory.
func Path(dir string) string { return filepath.Join(dir, FileName) }

// Open maps dir/cnc.dat read-only, for tools such as `ibgo aeron stat`.
func Open(dir string) (*File, error) { return OpenFile(Path(dir), false) }

// OpenFile maps a CnC file.
func OpenFile(path string, writable bool) (*File, error) {
	m, err := shm.Map(path, writable)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &Error{Op: "open", Path: path, Offset: -1, Err: err}
	}
	f, err := wrap(m.Bytes(), path)
	if err != nil {
		m.Close()
		return nil, err
	}
	f.mapping = m
	return f, nil
}

// Create creates path with the layout, formats it and maps it writable.
func Create(path string, layout Layout) (*File, error) {
	if err := layout.validate(); err != nil {
		return nil, err
	}
	m, err := shm.CreateAllocated(path, int64(layout.Length()))
	if err != nil {
		return nil, &Error{Op: "create", Path: path, Offset: -1, Err: err}
	}
	f, err := Init(m.Bytes(), layout)
	if err != nil {
		m.Close()
		return nil, err
	}
	f.mapping, f.path = m, path
	return f, nil
}

// Close unmaps the file (idempotent; a no-op for wrapped memory).
func (f *File) Close() error {
	m := f.mapping
	f.mapping = nil
	return m.Close()
}

// Bytes returns the whole file.
func (f *File) Bytes() []byte { return f.buf }

// FilePath is the path the file was opened from, if any.
func (f *File) FilePath() string { return f.path }

// Version is the CnC version, loaded with acquire semantics.
func (f *File) Version() SemanticVersion { return SemanticVersion(shm.LoadInt32(f.buf, VersionOffset)) }

// ClientLivenessTimeout is how long the driver waits for a client keepalive.
func (f *File) ClientLivenessTimeout() time.Duration {
	return time.Duration(le.Uint64(f.buf[ClientLivenessTimeoutOffset:]))
}

// StartTimestamp is when the driver started (epoch milliseconds).
func (f *File) StartTimestamp() int64 { return int64(le.Uint64(f.buf[StartTimestampOffset:])) }

// PID is the driver's process id.
func (f *File) PID() int64 { return int64(le.Uint64(f.buf[PIDOffset:])) }

// FilePageSize is the 1.53 file page size field; 0 in files from 1.48.
func (f *File) FilePageSize() int32 { return int32(le.Uint32(f.buf[FilePageSizeOffset:])) }

// ToDriverBuffer is the many-to-one ring buffer of commands, with trailer.
func (f *File) ToDriverBuffer() []byte { return f.toDriver }

// ToClientsBuffer is the broadcast buffer of responses, with trailer.
func (f *File) ToClientsBuffer() []byte { return f.toClients }

// CountersMetadataBuffer holds 512-byte counter metadata records.
func (f *File) CountersMetadataBuffer() []byte { return f.countersMeta }

// CountersValuesBuffer holds 128-byte counter value records.
func (f *File) CountersValuesBuffer() []byte { return f.countersValues }

// ErrorLogBuffer is the distinct error log.
func (f *File) ErrorLogBuffer() []byte { return f.errorLog }

// ToDriver returns the to-driver ring buffer.
func (f *File) ToDriver() (*ManyToOneRingBuffer, error) { return NewManyToOneRingBuffer(f.toDriver) }

// Counters returns a reader of the counters.
func (f *File) Counters() (*CountersReader, error) {
	return NewCountersReader(f.countersMeta, f.countersValues)
}

// DriverHeartbeat is the epoch-millisecond time the driver last marked
// itself alive in the to-driver ring buffer (consumer heartbeat).
func (f *File) DriverHeartbeat() int64 {
	return shm.LoadInt64(f.toDriver, len(f.toDriver)-RingBufferTrailerLength+rbConsumerHeartbeatOffset)
}
