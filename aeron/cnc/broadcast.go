package cnc

import "github.com/ibgo/ibgo/internal/shm"

// Broadcast buffer layout (aeron_broadcast_descriptor.h, Agrona
// BroadcastBufferDescriptor).
const (
	BroadcastTrailerLength    = 128
	bcTailIntentCounterOffset = 0
	bcTailCounterOffset       = 8
	bcLatestCounterOffset     = 16
)

// The broadcast buffer is a seqlock: the transmitter may overwrite a record
// while a slow receiver copies it, and the receiver detects that afterwards
// from the tail intent counter. Record headers and bodies are therefore
// accessed with word atomics (shm.StoreBytes/LoadBytes) so that a torn copy
// is detected, not a data race.

// BroadcastTransmitter writes driver responses for every client to see
// (aeron_broadcast_transmitter.c, Agrona BroadcastTransmitter). There is one
// transmitter per buffer.
type BroadcastTransmitter struct {
	buf          []byte
	capacity     int
	maxMsgLength int
	tailIntent   int
	tail         int
	latest       int
}

func broadcastCapacity(op string, b []byte) (int, error) {
	c := len(b) - BroadcastTrailerLength
	if !powerOfTwo(c) {
		return 0, invalid(op, "capacity %d (length %d less the %d-byte trailer) is not a power of two", c, len(b), BroadcastTrailerLength)
	}
	if !shm.Aligned(b, 8) {
		return 0, invalid(op, "buffer not 8-byte aligned")
	}
	return c, nil
}

// NewBroadcastTransmitter wraps b: a power-of-two capacity plus the
// 128-byte trailer.
func NewBroadcastTransmitter(b []byte) (*BroadcastTransmitter, error) {
	c, err := broadcastCapacity("broadcast transmitter", b)
	if err != nil {
		return nil, err
	}
	return &BroadcastTransmitter{buf: b, capacity: c, maxMsgLength: c / 8,
		tailIntent: c + bcTailIntentCounterOffset, tail: c + bcTailCounterOffset, latest: c + bcLatestCounterOffset}, nil
}

// Capacity is the data capacity.
func (t *BroadcastTransmitter) Capacity() int { return t.capacity }

// MaxMessageLength is capacity / 8.
func (t *BroadcastTransmitter) MaxMessageLength() int { return t.maxMsgLength }

func (t *BroadcastTransmitter) putHeader(off, length int, typeID int32) {
	shm.StoreInt64(t.buf, off, int64(uint32(length))|int64(typeID)<<32)
}

// Transmit writes a message (mirrors aeron_broadcast_transmitter_transmit).
func (t *BroadcastTransmitter) Transmit(msgTypeID int32, msg []byte) error {
	if len(msg) > t.maxMsgLength || msgTypeID < 1 {
		return invalid("broadcast transmit", "length %d > max message length %d or message type id %d < 1", len(msg), t.maxMsgLength, msgTypeID)
	}
	tail := shm.LoadInt64(t.buf, t.tail)
	if tail&(RecordAlignment-1) != 0 {
		return corrupt("broadcast transmit", int64(t.tail), "tail counter %d is not %d-byte aligned", tail, RecordAlignment)
	}
	off := int(tail & int64(t.capacity-1))
	recordLength := len(msg) + RecordHeaderLength
	aligned := align8(recordLength)
	newTail := tail + int64(aligned)
	toEnd := t.capacity - off
	if toEnd < aligned {
		shm.StoreInt64(t.buf, t.tailIntent, newTail+int64(toEnd))
		t.putHeader(off, toEnd, PaddingMsgTypeID)
		tail += int64(toEnd)
		off = 0
	} else {
		shm.StoreInt64(t.buf, t.tailIntent, newTail)
	}
	t.putHeader(off, recordLength, msgTypeID)
	shm.StoreBytes(t.buf, off+RecordHeaderLength, msg)
	shm.StoreInt64(t.buf, t.latest, tail)
	shm.StoreInt64(t.buf, t.tail, tail+int64(aligned))
	return nil
}

// BroadcastReceiver follows a broadcast buffer from the latest record at
// the time it was created (aeron_broadcast_receiver.c).
type BroadcastReceiver struct {
	buf          []byte
	capacity     int
	cursor       int64
	nextRecord   int64
	recordOffset int
	lapped       int64
	tailIntent   int
	tail         int
	latest       int
}

// NewBroadcastReceiver wraps b and starts at the latest record.
func NewBroadcastReceiver(b []byte) (*BroadcastReceiver, error) {
	c, err := broadcastCapacity("broadcast receiver", b)
	if err != nil {
		return nil, err
	}
	r := &BroadcastReceiver{buf: b, capacity: c,
		tailIntent: c + bcTailIntentCounterOffset, tail: c + bcTailCounterOffset, latest: c + bcLatestCounterOffset}
	latest := shm.LoadInt64(b, r.latest)
	if latest&(RecordAlignment-1) != 0 {
		return nil, corrupt("broadcast receiver", int64(r.latest), "latest counter %d is not %d-byte aligned", latest, RecordAlignment)
	}
	r.cursor, r.nextRecord = latest, latest
	r.recordOffset = int(latest & int64(c-1))
	return r, nil
}

// LappedCount is how often the receiver fell a whole buffer behind.
func (r *BroadcastReceiver) LappedCount() int64 { return r.lapped }

func (r *BroadcastReceiver) header(off int) (length int, typeID int32) {
	w := shm.LoadInt64(r.buf, off)
	return int(int32(uint32(w))), int32(w >> 32)
}

func (r *BroadcastReceiver) validateAt(cursor int64) bool {
	return cursor+int64(r.capacity) > shm.LoadInt64(r.buf, r.tailIntent)
}

// Validate reports whether the record last received was not overwritten
// while it was being read.
func (r *BroadcastReceiver) Validate() bool { return r.validateAt(r.cursor) }

// ReceiveNext moves to the next record if one is available
// (aeron_broadcast_receiver_receive_next). A receiver that fell a buffer
// behind skips to the latest record and counts a lap. A record header that
// breaks the layout is an error unless the record was overwritten while it
// was read, which is a lap too: the transmitter does not wait for readers.
func (r *BroadcastReceiver) ReceiveNext() (bool, error) {
	mask := int64(r.capacity - 1)
	for attempt := 0; ; attempt++ {
		tail := shm.LoadInt64(r.buf, r.tail)
		cursor := r.nextRecord
		if tail <= cursor {
			return false, nil
		}
		if !r.validateAt(cursor) {
			r.lapped++
			cursor = shm.LoadInt64(r.buf, r.latest)
		}
		off := int(cursor & mask)
		if off&(RecordAlignment-1) != 0 {
			return false, corrupt("broadcast receive", int64(r.latest), "record position %d is not %d-byte aligned", cursor, RecordAlignment)
		}
		n, typeID := r.header(off)
		bad := n < RecordHeaderLength || align8(n) > r.capacity-off
		var n0 int
		if !bad && typeID == PaddingMsgTypeID {
			n0, _ = r.header(0)
			bad = n0 < RecordHeaderLength || align8(n0) > r.capacity
		}
		if bad {
			if !r.validateAt(cursor) && attempt < 8 {
				// Overwritten under us: resume from the latest record.
				r.lapped++
				r.nextRecord = shm.LoadInt64(r.buf, r.latest)
				continue
			}
			return false, corrupt("broadcast receive", int64(off), "record length %d does not fit the %d bytes to the end of the buffer", n, r.capacity-off)
		}
		r.cursor = cursor
		r.nextRecord = cursor + int64(align8(n))
		if typeID == PaddingMsgTypeID {
			off = 0
			r.cursor = r.nextRecord
			r.nextRecord += int64(align8(n0))
		}
		r.recordOffset = off
		return true, nil
	}
}

// TypeID, Length and Offset describe the current record.
func (r *BroadcastReceiver) TypeID() int32 { _, t := r.header(r.recordOffset); return t }

// Length is the current record's message length.
func (r *BroadcastReceiver) Length() int {
	n, _ := r.header(r.recordOffset)
	return max(0, n-RecordHeaderLength)
}

// Offset is the current record's message offset in the buffer.
func (r *BroadcastReceiver) Offset() int { return r.recordOffset + RecordHeaderLength }

// CopyBroadcastReceiver copies each message out before handing it over and
// checks afterwards that it was not overwritten meanwhile (Aeron's
// aeron_broadcast_receiver_receive, Agrona CopyBroadcastReceiver).
type CopyBroadcastReceiver struct {
	r       *BroadcastReceiver
	scratch []byte
}

// NewCopyBroadcastReceiver wraps a receiver.
func NewCopyBroadcastReceiver(r *BroadcastReceiver) *CopyBroadcastReceiver {
	return &CopyBroadcastReceiver{r: r, scratch: make([]byte, 4096)}
}

// lapped handles a record overwritten while it was copied: the position
// after it came from a header that may be torn, so unlike Aeron, which
// treats the receiver as lost, resume from the latest complete record.
func (c *CopyBroadcastReceiver) lapped() error {
	c.r.lapped++
	c.r.nextRecord = shm.LoadInt64(c.r.buf, c.r.latest)
	return ErrLapped
}

// Receive delivers at most one message; it returns 1 when it did. ErrLapped
// means messages were lost: the client must treat its state as stale.
func (c *CopyBroadcastReceiver) Receive(handler MessageHandler) (int, error) {
	lapped := c.r.lapped
	ok, err := c.r.ReceiveNext()
	if err != nil || !ok {
		return 0, err
	}
	if lapped != c.r.lapped {
		return 0, ErrLapped
	}
	n, typeID := c.r.header(c.r.recordOffset)
	length := n - RecordHeaderLength
	if length < 0 || c.r.recordOffset+RecordHeaderLength+align8(length) > c.r.capacity {
		if !c.r.Validate() {
			return 0, c.lapped()
		}
		return 0, corrupt("broadcast receive", int64(c.r.recordOffset), "record length %d does not fit the buffer", n)
	}
	if cap(c.scratch) < length {
		c.scratch = make([]byte, length+length/2)
	}
	msg := c.scratch[:length]
	shm.LoadBytes(msg, c.r.buf, c.r.recordOffset+RecordHeaderLength)
	if !c.r.Validate() {
		return 0, c.lapped()
	}
	handler(typeID, msg)
	return 1, nil
}
