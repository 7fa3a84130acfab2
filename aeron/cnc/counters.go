package cnc

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/ibgo/ibgo/internal/shm"
)

// Counter record layouts (aeron_counter_value_descriptor_t and
// aeron_counter_metadata_descriptor_t).
const (
	CounterValueLength    = 128
	CounterMetadataLength = 512

	counterValueOffset        = 0
	counterRegistrationOffset = 8
	counterOwnerOffset        = 16
	counterReferenceOffset    = 24

	metaStateOffset       = 0
	metaTypeIDOffset      = 4
	metaFreeForReuseOff   = 8
	metaKeyOffset         = 16
	MaxKeyLength          = 112
	metaLabelLengthOffset = 128
	metaLabelOffset       = 132
	MaxLabelLength        = 380

	// Record states.
	RecordUnused    = 0
	RecordAllocated = 1
	RecordReclaimed = -1

	NotFreeToReuse        = math.MaxInt64
	DefaultRegistrationID = 0
	DefaultOwnerID        = 0
	DefaultReferenceID    = 0
	NullCounterID         = -1
)

// Counter type ids (aeron_counters.h).
const (
	TypeSystem                   = 0
	TypePublisherLimit           = 1  // pub-lmt
	TypeSenderPosition           = 2  // snd-pos
	TypeReceiverHWM              = 3  // rcv-hwm
	TypeSubscriberPosition       = 4  // sub-pos
	TypeReceiverPosition         = 5  // rcv-pos
	TypeSendChannelStatus        = 6  // snd-channel
	TypeReceiveChannelStatus     = 7  // rcv-channel
	TypeSenderLimit              = 9  // snd-lmt
	TypePerImage                 = 10 // rcv-cc-*, per image
	TypeClientHeartbeatTimestamp = 11 // client-heartbeat
	TypePublisherPosition        = 12 // pub-pos (sampled)
	TypeSenderBPE                = 13 // snd-bpe
	TypeLocalSockAddr            = 14 // snd-/rcv-local-sockaddr
	TypeNameResolverNeighbors    = 15
	TypeNameResolverCacheEntries = 16
	TypeFlowControlReceivers     = 17 // fc-receivers
	TypeMDCDestinations          = 18 // mdc-num-dest
	TypeSenderNaksReceived       = 19 // Aeron 1.53
	TypeReceiverNaksSent         = 20 // Aeron 1.53
	// TypeMediaStatistic is ibgo's own: a running total a network medium
	// keeps ("<medium>: <name>", e.g. "aeron:ib: receive queue empty
	// drops"), published by the driver (driver.StatisticsReporter). The
	// id is above Aeron's (0..20, 50..68) and its Archive's and
	// Cluster's (100..299).
	TypeMediaStatistic = 1100
)

// Channel endpoint status values (snd-channel / rcv-channel counters).
const (
	ChannelStatusInitializing = 0
	ChannelStatusErrored      = -1
	ChannelStatusActive       = 1
	ChannelStatusClosing      = 2
)

// SystemCounterLabels are the labels of the driver's system counters, ids
// 0..39 (aeron_system_counters.c, as written by Aeron 1.48; counters 15 and
// 34 append the driver version). Aeron 1.53 adds ids 40..45.
var SystemCounterLabels = []string{
	"Bytes sent",
	"Bytes received",
	"Failed offers to ReceiverProxy",
	"Failed offers to SenderProxy",
	"Failed offers to DriverConductorProxy",
	"NAKs sent",
	"NAKs received",
	"Status Messages sent",
	"Status Messages received",
	"Heartbeats sent",
	"Heartbeats received",
	"Retransmits sent",
	"Flow control under runs",
	"Flow control over runs",
	"Invalid packets",
	"Errors",
	"Short sends",
	"Failed attempts to free log buffers",
	"Sender flow control limits, i.e. back-pressure events",
	"Unblocked Publications",
	"Unblocked Control Commands",
	"Possible TTL Asymmetry",
	"ControllableIdleStrategy status",
	"Loss gap fills",
	"Client liveness timeouts",
	"Resolution changes",
	"Conductor max cycle time doing its work in ns",
	"Conductor work cycle exceeded threshold count",
	"Sender max cycle time doing its work in ns",
	"Sender work cycle exceeded threshold count",
	"Receiver max cycle time doing its work in ns",
	"Receiver work cycle exceeded threshold count",
	"NameResolver max time in ns",
	"NameResolver exceeded threshold count",
	"Aeron software",
	"Bytes currently mapped",
	"Retransmitted bytes",
	"Retransmit Pool Overflow count",
	"Error Frames received",
	"Error Frames sent",
}

// Counter is one allocated counter as read by ForEach.
type Counter struct {
	ID             int32
	TypeID         int32
	Value          int64
	RegistrationID int64
	OwnerID        int64
	ReferenceID    int64
	Key            []byte // 112 bytes; aliases the shared memory
	Label          string
}

// CountersReader reads counters (aeron_counters_reader_t, Java CountersReader).
type CountersReader struct {
	meta, values []byte
	maxCounterID int32
}

// NewCountersReader wraps the metadata and values buffers.
func NewCountersReader(meta, values []byte) (*CountersReader, error) {
	if len(values)%CounterValueLength != 0 || len(meta) < len(values)/CounterValueLength*CounterMetadataLength {
		return nil, invalid("counters", "metadata of %d bytes and values of %d bytes do not describe whole counters", len(meta), len(values))
	}
	if !shm.Aligned(meta, 8) || !shm.Aligned(values, 8) {
		return nil, invalid("counters", "buffers not 8-byte aligned")
	}
	return &CountersReader{meta: meta, values: values, maxCounterID: int32(len(values)/CounterValueLength) - 1}, nil
}

// MaxCounterID is the highest counter id the buffers hold.
func (r *CountersReader) MaxCounterID() int32 { return r.maxCounterID }

func (r *CountersReader) valid(id int32) bool { return id >= 0 && id <= r.maxCounterID }

func (r *CountersReader) metaOff(id int32) int  { return int(id) * CounterMetadataLength }
func (r *CountersReader) valueOff(id int32) int { return int(id) * CounterValueLength }

// CounterValue loads a counter's value; 0 for an id out of range.
func (r *CountersReader) CounterValue(id int32) int64 {
	if !r.valid(id) {
		return 0
	}
	return shm.LoadInt64(r.values, r.valueOff(id)+counterValueOffset)
}

// CounterState is RecordUnused, RecordAllocated or RecordReclaimed.
func (r *CountersReader) CounterState(id int32) int32 {
	if !r.valid(id) {
		return RecordUnused
	}
	return shm.LoadInt32(r.meta, r.metaOff(id)+metaStateOffset)
}

// CounterTypeID is the counter's type id.
func (r *CountersReader) CounterTypeID(id int32) int32 {
	if !r.valid(id) {
		return -1
	}
	return int32(le.Uint32(r.meta[r.metaOff(id)+metaTypeIDOffset:]))
}

// RegistrationID, OwnerID and ReferenceID are stored with the value.
func (r *CountersReader) RegistrationID(id int32) int64 {
	if !r.valid(id) {
		return 0
	}
	return shm.LoadInt64(r.values, r.valueOff(id)+counterRegistrationOffset)
}

// OwnerID is the id of the client or driver resource that owns the counter.
func (r *CountersReader) OwnerID(id int32) int64 {
	if !r.valid(id) {
		return 0
	}
	return int64(le.Uint64(r.values[r.valueOff(id)+counterOwnerOffset:]))
}

// ReferenceID links a counter to another resource (e.g. sub-pos → image).
func (r *CountersReader) ReferenceID(id int32) int64 {
	if !r.valid(id) {
		return 0
	}
	return int64(le.Uint64(r.values[r.valueOff(id)+counterReferenceOffset:]))
}

// FreeForReuseDeadline is when a freed counter id may be reused (epoch ms).
func (r *CountersReader) FreeForReuseDeadline(id int32) int64 {
	if !r.valid(id) {
		return 0
	}
	return shm.LoadInt64(r.meta, r.metaOff(id)+metaFreeForReuseOff)
}

// CounterKey is the counter's 112-byte key.
func (r *CountersReader) CounterKey(id int32) []byte {
	if !r.valid(id) {
		return nil
	}
	o := r.metaOff(id) + metaKeyOffset
	return r.meta[o : o+MaxKeyLength]
}

// CounterLabel is the counter's label (label_length clamped to 380 bytes).
func (r *CountersReader) CounterLabel(id int32) string {
	if !r.valid(id) {
		return ""
	}
	o := r.metaOff(id)
	n := int(shm.LoadInt32(r.meta, o+metaLabelLengthOffset))
	n = min(max(n, 0), MaxLabelLength)
	return string(r.meta[o+metaLabelOffset : o+metaLabelOffset+n])
}

// ForEach calls fn for each allocated counter in id order and stops at the
// first unused record, as aeron_counters_reader_foreach_counter does; fn
// returns false to stop early.
func (r *CountersReader) ForEach(fn func(c Counter) bool) {
	for id := int32(0); id <= r.maxCounterID; id++ {
		switch r.CounterState(id) {
		case RecordUnused:
			return
		case RecordAllocated:
			c := Counter{
				ID: id, TypeID: r.CounterTypeID(id), Value: r.CounterValue(id),
				RegistrationID: r.RegistrationID(id), OwnerID: r.OwnerID(id), ReferenceID: r.ReferenceID(id),
				Key: r.CounterKey(id), Label: r.CounterLabel(id),
			}
			if !fn(c) {
				return
			}
		}
	}
}

// FindByTypeIDAndRegistrationID returns the first allocated counter with
// both ids, or NullCounterID.
func (r *CountersReader) FindByTypeIDAndRegistrationID(typeID int32, registrationID int64) int32 {
	found := int32(NullCounterID)
	r.ForEach(func(c Counter) bool {
		if c.TypeID == typeID && c.RegistrationID == registrationID {
			found = c.ID
			return false
		}
		return true
	})
	return found
}

// CountersManager allocates and frees counters: the driver's side
// (aeron_counters_manager.c). It is not safe for concurrent use; readers in
// other processes may read while it works.
type CountersManager struct {
	CountersReader
	highWaterMark      int32
	freeList           []int32
	freeToReuseTimeout int64 // ms
	clock              func() int64
}

// NewCountersManager manages the buffers; clock returns epoch milliseconds.
func NewCountersManager(meta, values []byte, freeToReuseTimeoutMs int64, clock func() int64) (*CountersManager, error) {
	r, err := NewCountersReader(meta, values)
	if err != nil {
		return nil, err
	}
	return &CountersManager{CountersReader: *r, highWaterMark: -1, freeToReuseTimeout: freeToReuseTimeoutMs, clock: clock}, nil
}

func (m *CountersManager) nextCounterID() (int32, error) {
	if len(m.freeList) > 0 {
		now := m.clock()
		for i, id := range m.freeList {
			if now >= m.FreeForReuseDeadline(id) {
				m.freeList = append(m.freeList[:i], m.freeList[i+1:]...)
				vo := m.valueOff(id)
				shm.StoreInt64(m.values, vo+counterRegistrationOffset, DefaultRegistrationID)
				le.PutUint64(m.values[vo+counterOwnerOffset:], DefaultOwnerID)
				le.PutUint64(m.values[vo+counterReferenceOffset:], DefaultReferenceID)
				shm.StoreInt64(m.values, vo+counterValueOffset, 0)
				return id, nil
			}
		}
	}
	if m.highWaterMark+1 > m.maxCounterID {
		return 0, invalid("allocate counter", "max counter id (%d) exceeded", m.maxCounterID)
	}
	m.highWaterMark++
	return m.highWaterMark, nil
}

// Allocate allocates a counter; the key is truncated to 112 bytes and the
// label to 380, as Aeron does (aeron_counters_manager_allocate).
func (m *CountersManager) Allocate(typeID int32, key []byte, label string) (int32, error) {
	id, err := m.nextCounterID()
	if err != nil {
		return 0, fmt.Errorf("%w (type %d, label %q)", err, typeID, label)
	}
	o := m.metaOff(id)
	le.PutUint32(m.meta[o+metaTypeIDOffset:], uint32(typeID))
	shm.StoreInt64(m.meta, o+metaFreeForReuseOff, NotFreeToReuse)
	k := m.meta[o+metaKeyOffset : o+metaKeyOffset+MaxKeyLength]
	clear(k)
	copy(k, key)
	n := copy(m.meta[o+metaLabelOffset:o+metaLabelOffset+MaxLabelLength], label)
	shm.StoreInt32(m.meta, o+metaLabelLengthOffset, int32(n))
	shm.StoreInt32(m.meta, o+metaStateOffset, RecordAllocated)
	return id, nil
}

// Free reclaims a counter; its id is reused after the free-to-reuse timeout.
func (m *CountersManager) Free(id int32) error {
	if !m.valid(id) || m.CounterState(id) != RecordAllocated {
		return invalid("free counter", "counter %d is not allocated", id)
	}
	o := m.metaOff(id)
	shm.StoreInt32(m.meta, o+metaStateOffset, RecordReclaimed)
	clear(m.meta[o+metaKeyOffset : o+metaKeyOffset+MaxKeyLength])
	shm.StoreInt64(m.meta, o+metaFreeForReuseOff, m.clock()+m.freeToReuseTimeout)
	m.freeList = append(m.freeList, id)
	return nil
}

// Value returns the counter's value word for updates (SetRelease, Add …).
func (m *CountersManager) Value(id int32) *atomic.Int64 {
	if !m.valid(id) {
		return nil
	}
	return shm.Int64At(m.values, m.valueOff(id)+counterValueOffset)
}

// SetRegistrationID stores the counter's registration id.
func (m *CountersManager) SetRegistrationID(id int32, v int64) {
	if m.valid(id) {
		shm.StoreInt64(m.values, m.valueOff(id)+counterRegistrationOffset, v)
	}
}

// SetOwnerID stores the counter's owner id.
func (m *CountersManager) SetOwnerID(id int32, v int64) {
	if m.valid(id) {
		le.PutUint64(m.values[m.valueOff(id)+counterOwnerOffset:], uint64(v))
	}
}

// SetReferenceID stores the counter's reference id.
func (m *CountersManager) SetReferenceID(id int32, v int64) {
	if m.valid(id) {
		le.PutUint64(m.values[m.valueOff(id)+counterReferenceOffset:], uint64(v))
	}
}

// UpdateLabel replaces a counter's label.
func (m *CountersManager) UpdateLabel(id int32, label string) {
	if !m.valid(id) {
		return
	}
	o := m.metaOff(id)
	n := copy(m.meta[o+metaLabelOffset:o+metaLabelOffset+MaxLabelLength], label)
	shm.StoreInt32(m.meta, o+metaLabelLengthOffset, int32(n))
}
