package cnc

import (
	"fmt"

	"github.com/ibgo/ibgo/internal/shm"
)

// Ring buffer layout (Agrona RingBufferDescriptor, aeron_rb.h): the data
// capacity is followed by a trailer of counters on separate cache-line
// pairs.
const (
	RingBufferTrailerLength    = 768
	rbTailPositionOffset       = 128
	rbHeadCachePositionOffset  = 256
	rbHeadPositionOffset       = 384
	rbCorrelationCounterOffset = 512
	rbConsumerHeartbeatOffset  = 640

	// RecordHeaderLength is the {int32 length, int32 type} record header of
	// the ring and broadcast buffers; records are aligned to it.
	RecordHeaderLength = 8
	RecordAlignment    = 8
	// PaddingMsgTypeID marks the record that fills the end of the buffer
	// when a message wraps.
	PaddingMsgTypeID = -1

	paddingTypeWord uint32 = 0xFFFFFFFF // PaddingMsgTypeID as stored
)

func align8(n int) int { return (n + RecordAlignment - 1) &^ (RecordAlignment - 1) }

// MessageHandler receives a message read from a ring or broadcast buffer.
// The slice is only valid during the call.
type MessageHandler func(msgTypeID int32, msg []byte)

// ManyToOneRingBuffer is the to-driver command queue: any number of client
// processes write, the driver reads (Agrona ManyToOneRingBuffer,
// aeron_mpsc_rb.c).
type ManyToOneRingBuffer struct {
	buf          []byte
	capacity     int
	maxMsgLength int
	tail         int // trailer offsets in buf
	headCache    int
	head         int
	correlation  int
	heartbeat    int
}

// NewManyToOneRingBuffer wraps b: a power-of-two capacity plus the 768-byte
// trailer, 8-byte aligned.
func NewManyToOneRingBuffer(b []byte) (*ManyToOneRingBuffer, error) {
	c := len(b) - RingBufferTrailerLength
	if !powerOfTwo(c) {
		return nil, invalid("ring buffer", "capacity %d (length %d less the %d-byte trailer) is not a power of two", c, len(b), RingBufferTrailerLength)
	}
	if !shm.Aligned(b, 8) {
		return nil, invalid("ring buffer", "buffer not 8-byte aligned")
	}
	return &ManyToOneRingBuffer{
		buf: b, capacity: c, maxMsgLength: c / 8,
		tail: c + rbTailPositionOffset, headCache: c + rbHeadCachePositionOffset, head: c + rbHeadPositionOffset,
		correlation: c + rbCorrelationCounterOffset, heartbeat: c + rbConsumerHeartbeatOffset,
	}, nil
}

// Capacity is the data capacity in bytes.
func (rb *ManyToOneRingBuffer) Capacity() int { return rb.capacity }

// MaxMessageLength is the largest message Write accepts: capacity / 8.
func (rb *ManyToOneRingBuffer) MaxMessageLength() int { return rb.maxMsgLength }

func (rb *ManyToOneRingBuffer) check(msgTypeID int32, length int) error {
	if msgTypeID < 1 {
		return invalid("ring buffer write", "message type id %d must be greater than zero", msgTypeID)
	}
	if length < 0 || length > rb.maxMsgLength {
		return invalid("ring buffer write", "encoded message length %d exceeds the maximum of %d", length, rb.maxMsgLength)
	}
	return nil
}

// corruptPosition is returned by claimCapacity when the head or tail in
// the trailer is not a record boundary. (A head beyond a tail snapshot is
// normal: the tail moved meanwhile, and the CAS fails and retries.)
const corruptPosition = -2

// claimCapacity reserves space for a record by CAS on the tail, inserting a
// padding record when the record would wrap; it returns the record's index,
// -1 if there is no room or corruptPosition (mirrors
// ManyToOneRingBuffer.claimCapacity).
func (rb *ManyToOneRingBuffer) claimCapacity(recordLength int) int {
	required := align8(recordLength)
	mask := int64(rb.capacity - 1)
	head := shm.LoadInt64(rb.buf, rb.headCache)
	var tail int64
	var tailIndex, padding int
	for {
		tail = shm.LoadInt64(rb.buf, rb.tail)
		if tail&(RecordAlignment-1) != 0 || head&(RecordAlignment-1) != 0 {
			return corruptPosition
		}
		if required > rb.capacity-int(tail-head) {
			head = shm.LoadInt64(rb.buf, rb.head)
			if head&(RecordAlignment-1) != 0 {
				return corruptPosition
			}
			if required > rb.capacity-int(tail-head) {
				return -1
			}
			shm.StoreInt64(rb.buf, rb.headCache, head)
		}
		padding = 0
		tailIndex = int(tail & mask)
		toEnd := rb.capacity - tailIndex
		if required > toEnd {
			headIndex := int(head & mask)
			if required > headIndex {
				head = shm.LoadInt64(rb.buf, rb.head)
				if head&(RecordAlignment-1) != 0 {
					return corruptPosition
				}
				headIndex = int(head & mask)
				if required > headIndex {
					return -1
				}
				shm.StoreInt64(rb.buf, rb.headCache, head)
			}
			padding = toEnd
		}
		if shm.CompareAndSwapInt64(rb.buf, rb.tail, tail, tail+int64(required+padding)) {
			break
		}
	}
	if padding != 0 {
		shm.StoreInt32(rb.buf, tailIndex, int32(-padding))
		le.PutUint32(rb.buf[tailIndex+4:], paddingTypeWord)
		shm.StoreInt32(rb.buf, tailIndex, int32(padding))
		tailIndex = 0
	}
	return tailIndex
}

// Write appends a message. ErrInsufficientCapacity means the driver has not
// consumed enough yet; the caller may retry.
func (rb *ManyToOneRingBuffer) Write(msgTypeID int32, msg []byte) error {
	if err := rb.check(msgTypeID, len(msg)); err != nil {
		return err
	}
	recordLength := len(msg) + RecordHeaderLength
	i := rb.claimCapacity(recordLength)
	if i < 0 {
		return rb.claimError(i)
	}
	shm.StoreInt32(rb.buf, i, int32(-recordLength))
	copy(rb.buf[i+RecordHeaderLength:], msg)
	le.PutUint32(rb.buf[i+4:], uint32(msgTypeID))
	shm.StoreInt32(rb.buf, i, int32(recordLength))
	return nil
}

func (rb *ManyToOneRingBuffer) claimError(code int) error {
	if code == corruptPosition {
		return corrupt("ring buffer write", int64(rb.tail), "head %d and tail %d are not valid positions", rb.ConsumerPosition(), rb.ProducerPosition())
	}
	return ErrInsufficientCapacity
}

// TryClaim reserves room for a message of length bytes that the caller
// writes in place at the returned index (Buffer()[index:index+length]) and
// then commits or aborts (ManyToOneRingBuffer.tryClaim).
func (rb *ManyToOneRingBuffer) TryClaim(msgTypeID int32, length int) (int, error) {
	if err := rb.check(msgTypeID, length); err != nil {
		return 0, err
	}
	recordLength := length + RecordHeaderLength
	i := rb.claimCapacity(recordLength)
	if i < 0 {
		return 0, rb.claimError(i)
	}
	shm.StoreInt32(rb.buf, i, int32(-recordLength))
	le.PutUint32(rb.buf[i+4:], uint32(msgTypeID))
	return i + RecordHeaderLength, nil
}

func (rb *ManyToOneRingBuffer) claimed(op string, index int) (int, int32, error) {
	i := index - RecordHeaderLength
	if i < 0 || i > rb.capacity-RecordHeaderLength || i%RecordAlignment != 0 {
		return 0, 0, invalid(op, "index %d is not a claimed message", index)
	}
	n := shm.LoadInt32(rb.buf, i)
	if n >= 0 {
		return 0, 0, invalid(op, "claimed space at index %d was already committed or aborted", index)
	}
	return i, -n, nil
}

// Commit publishes a claimed message.
func (rb *ManyToOneRingBuffer) Commit(index int) error {
	i, n, err := rb.claimed("ring buffer commit", index)
	if err != nil {
		return err
	}
	shm.StoreInt32(rb.buf, i, n)
	return nil
}

// Abort turns a claimed message into padding, which the reader skips.
func (rb *ManyToOneRingBuffer) Abort(index int) error {
	i, n, err := rb.claimed("ring buffer abort", index)
	if err != nil {
		return err
	}
	le.PutUint32(rb.buf[i+4:], paddingTypeWord)
	shm.StoreInt32(rb.buf, i, n)
	return nil
}

// Buffer is the ring buffer's memory, for writing claimed messages.
func (rb *ManyToOneRingBuffer) Buffer() []byte { return rb.buf }

// Read delivers up to limit messages in the order written, stopping at the
// first record not yet committed or at the end of the buffer, then zeroes
// what it consumed and advances the head (ManyToOneRingBuffer.read). A
// record whose length breaks the layout ends the read with an error; the
// records delivered before it are consumed.
func (rb *ManyToOneRingBuffer) Read(handler MessageHandler, limit int) (int, error) {
	head := shm.LoadInt64(rb.buf, rb.head)
	if head&(RecordAlignment-1) != 0 {
		return 0, corrupt("read ring buffer", int64(rb.head), "head position %d is not %d-byte aligned", head, RecordAlignment)
	}
	headIndex := int(head & int64(rb.capacity-1))
	contiguous := rb.capacity - headIndex
	read, bytesRead := 0, 0
	var err error
	for bytesRead < contiguous && read < limit {
		i := headIndex + bytesRead
		n := int(shm.LoadInt32(rb.buf, i))
		if n <= 0 {
			break
		}
		if n < RecordHeaderLength || align8(n) > contiguous-bytesRead {
			err = corrupt("read ring buffer", int64(i), "record length %d does not fit the %d bytes to the end of the buffer", n, contiguous-bytesRead)
			break
		}
		bytesRead += align8(n)
		t := int32(le.Uint32(rb.buf[i+4:]))
		if t == PaddingMsgTypeID {
			continue
		}
		read++
		handler(t, rb.buf[i+RecordHeaderLength:i+n])
	}
	if bytesRead > 0 {
		clear(rb.buf[headIndex : headIndex+bytesRead])
		shm.StoreInt64(rb.buf, rb.head, head+int64(bytesRead))
	}
	return read, err
}

// NextCorrelationID mints a unique id for a command (and client ids).
func (rb *ManyToOneRingBuffer) NextCorrelationID() int64 {
	return shm.AddInt64(rb.buf, rb.correlation, 1) - 1
}

// ConsumerHeartbeatTime is the driver's last keepalive (epoch ms).
func (rb *ManyToOneRingBuffer) ConsumerHeartbeatTime() int64 {
	return shm.LoadInt64(rb.buf, rb.heartbeat)
}

// SetConsumerHeartbeatTime stores the driver's keepalive (epoch ms).
func (rb *ManyToOneRingBuffer) SetConsumerHeartbeatTime(ms int64) {
	shm.StoreInt64(rb.buf, rb.heartbeat, ms)
}

// ProducerPosition is the tail: bytes ever claimed.
func (rb *ManyToOneRingBuffer) ProducerPosition() int64 { return shm.LoadInt64(rb.buf, rb.tail) }

// ConsumerPosition is the head: bytes ever consumed.
func (rb *ManyToOneRingBuffer) ConsumerPosition() int64 { return shm.LoadInt64(rb.buf, rb.head) }

// Size is the number of bytes written and not yet consumed.
func (rb *ManyToOneRingBuffer) Size() int {
	for {
		before := rb.ConsumerPosition()
		tail := rb.ProducerPosition()
		after := rb.ConsumerPosition()
		if before == after {
			return int(tail - after)
		}
	}
}

// Unblock is for the driver when a client died between claiming and
// committing a record: it turns the blocking claim at the head into padding
// so the reader can move on (ManyToOneRingBuffer.unblock). It reports
// whether it did.
func (rb *ManyToOneRingBuffer) Unblock() bool {
	head := shm.LoadInt64(rb.buf, rb.head)
	tail := shm.LoadInt64(rb.buf, rb.tail)
	if head == tail || head&(RecordAlignment-1) != 0 || tail&(RecordAlignment-1) != 0 {
		return false
	}
	mask := int64(rb.capacity - 1)
	consumer := int(head & mask)
	producer := int(tail & mask)
	n := shm.LoadInt32(rb.buf, consumer)
	if n < 0 {
		le.PutUint32(rb.buf[consumer+4:], paddingTypeWord)
		shm.StoreInt32(rb.buf, consumer, -n)
		return true
	}
	if n > 0 {
		return false
	}
	limit := rb.capacity
	if producer > consumer {
		limit = producer
	}
	for i := consumer + RecordAlignment; i < limit; i += RecordAlignment {
		if shm.LoadInt32(rb.buf, i) != 0 {
			// Confirm the gap is still all zero before claiming it.
			for j := i - RecordAlignment; j >= consumer; j -= RecordAlignment {
				if shm.LoadInt64(rb.buf, j) != 0 {
					return false
				}
			}
			le.PutUint32(rb.buf[consumer+4:], paddingTypeWord)
			shm.StoreInt32(rb.buf, consumer, int32(i-consumer))
			return true
		}
	}
	return false
}

func (rb *ManyToOneRingBuffer) String() string {
	return fmt.Sprintf("ManyToOneRingBuffer{capacity: %d, head: %d, tail: %d}", rb.capacity, rb.ConsumerPosition(), rb.ProducerPosition())
}
