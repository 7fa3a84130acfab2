package cnc

import (
	"encoding/binary"
	"testing"

	"github.com/ibgo/ibgo/aeron/internal/testvec"
	"github.com/ibgo/ibgo/internal/shm"
)

// FuzzRingBufferRead gives the driver's reader a to-driver ring buffer with
// arbitrary contents and head position, as a misbehaving client could leave
// it. Properties: no panic; every message lies inside the buffer and is at
// most the record's length; the head only moves forward, by no more than
// the capacity; Unblock and a following write/read work on what is left.
func FuzzRingBufferRead(f *testing.F) {
	rb := newRing(f, 1024)
	rb.Write(1, []byte("hello"))
	rb.Write(2, make([]byte, 100))
	i, _ := rb.TryClaim(3, 20)
	_ = i
	f.Add(append([]byte(nil), rb.buf[:1024]...), uint16(0), uint16(64))
	cnc := testvec.MustBytes(testvec.CnC)
	f.Add(append([]byte(nil), cnc[128:128+1024]...), uint16(176), uint16(176))
	f.Add(make([]byte, 1024), uint16(1000), uint16(1008))
	f.Fuzz(func(t *testing.T, data []byte, head, tail uint16) {
		b := shm.Alloc(1024 + RingBufferTrailerLength)
		copy(b[:1024], data)
		rb, err := NewManyToOneRingBuffer(b)
		if err != nil {
			t.Fatal(err)
		}
		h := int64(head) &^ 7
		tl := max(h, int64(tail)&^7)
		shm.StoreInt64(b, rb.head, h)
		shm.StoreInt64(b, rb.tail, tl)
		for round := 0; round < 3; round++ {
			before := rb.ConsumerPosition()
			_, err := rb.Read(func(typeID int32, msg []byte) {
				if len(msg) > 1024-RecordHeaderLength {
					t.Fatalf("message of %d bytes", len(msg))
				}
			}, 100)
			after := rb.ConsumerPosition()
			if after < before || after-before > 1024 {
				t.Fatalf("head moved from %d to %d", before, after)
			}
			if err != nil {
				break
			}
		}
		rb.Unblock()
		rb.Size()
		if err := rb.Write(5, []byte("x")); err == nil {
			rb.Read(func(int32, []byte) {}, 100)
		}
	})
}

// FuzzCnCFile wraps arbitrary CnC headers and buffers and walks everything
// a tool such as `ibgo aeron stat` reads: counters, the error log, the
// broadcast buffer. Properties: no panic; a wrapped file's buffers lie in
// the file; readers return or fail cleanly.
func FuzzCnCFile(f *testing.F) {
	// A tiny layout keeps inputs small, so the fuzzer mutates and
	// minimizes quickly.
	tiny := Layout{ToDriverCapacity: 64, ToClientsCapacity: 128, CounterValuesLength: 2 * CounterValueLength,
		ErrorLogLength: 128, FilePageSize: 64}
	b := shm.Alloc(tiny.Length())
	file, _ := Init(b, tiny)
	m, _ := NewCountersManager(file.CountersMetadataBuffer(), file.CountersValuesBuffer(), 0, func() int64 { return 0 })
	m.Allocate(TypeSystem, []byte{1}, "Bytes sent")
	el, _ := NewDistinctErrorLog(file.ErrorLogBuffer(), func() int64 { return 1 })
	el.Record(1, "an error")
	tx, _ := NewBroadcastTransmitter(file.ToClientsBuffer())
	tx.Transmit(RspOnOperationSuccess, make([]byte, 8))
	f.Add(append([]byte(nil), b...))
	f.Add(append([]byte(nil), testvec.MustBytes(testvec.CnC)[:HeaderLength]...))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < HeaderLength {
			return
		}
		// Small files only: scale the header's lengths into the input.
		c := shm.Alloc(len(data))
		copy(c, data)
		for i := 0; i < 5; i++ {
			off := ToDriverBufferLengthOffset + 4*i
			v := binary.LittleEndian.Uint32(c[off:])
			binary.LittleEndian.PutUint32(c[off:], v%uint32(len(data)+1))
		}
		file, err := Wrap(c)
		if err != nil {
			return
		}
		for _, part := range [][]byte{file.ToDriverBuffer(), file.ToClientsBuffer(), file.CountersMetadataBuffer(), file.CountersValuesBuffer(), file.ErrorLogBuffer()} {
			if len(part) > len(c) {
				t.Fatal("buffer larger than the file")
			}
		}
		_ = file.DriverHeartbeat()
		if r, err := file.Counters(); err == nil {
			r.ForEach(func(c Counter) bool {
				if len(c.Label) > MaxLabelLength || len(c.Key) != MaxKeyLength {
					t.Fatalf("counter %d: label %d bytes, key %d", c.ID, len(c.Label), len(c.Key))
				}
				return true
			})
		}
		ReadErrorLog(file.ErrorLogBuffer(), 0, func(o Observation) {
			if len(o.Text) > len(file.ErrorLogBuffer()) {
				t.Fatal("error text longer than the log")
			}
		})
		ReadLossReport(file.ErrorLogBuffer(), func(LossEntry) {})
		if rx, err := NewBroadcastReceiver(file.ToClientsBuffer()); err == nil {
			rx.nextRecord = 0
			cr := NewCopyBroadcastReceiver(rx)
			for i := 0; i < 10; i++ {
				if n, err := cr.Receive(func(int32, []byte) {}); n == 0 || err != nil {
					break
				}
			}
		}
		if rb, err := file.ToDriver(); err == nil {
			rb.Read(func(int32, []byte) {}, 10)
		}
	})
}
