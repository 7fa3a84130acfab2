package cnc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ibgo/ibgo/internal/shm"
	"github.com/stretchr/testify/require"
)

func smallLayout() Layout {
	return Layout{ToDriverCapacity: 4096, ToClientsCapacity: 4096, CounterValuesLength: 16 * CounterValueLength,
		ErrorLogLength: 4096, ClientLivenessTimeout: 10 * time.Second, StartTimestamp: time.UnixMilli(1234567), PID: 42}
}

func TestCreateOpen(t *testing.T) {
	dir := t.TempDir()
	l := smallLayout()
	require.Equal(t, 6*4096, l.Length(), "23,552 bytes rounded up to the page size")
	f, err := Create(Path(dir), l)
	require.NoError(t, err)
	rb, err := f.ToDriver()
	require.NoError(t, err)
	require.NoError(t, rb.Write(CmdClientKeepalive, []byte("hello")))
	rb.SetConsumerHeartbeatTime(99)
	m, err := NewCountersManager(f.CountersMetadataBuffer(), f.CountersValuesBuffer(), 1000, func() int64 { return 0 })
	require.NoError(t, err)
	id, err := m.Allocate(TypeSystem, []byte{0, 0, 0, 0}, "Bytes sent")
	require.NoError(t, err)
	m.Value(id).Store(1234)
	el, err := NewDistinctErrorLog(f.ErrorLogBuffer(), func() int64 { return 5 })
	require.NoError(t, err)
	require.NoError(t, el.Record(1, "boom"))
	require.NoError(t, f.Close())
	require.NoError(t, f.Close())

	g, err := Open(dir)
	require.NoError(t, err)
	defer g.Close()
	require.Equal(t, Version, g.Version())
	require.Equal(t, int64(42), g.PID())
	require.Equal(t, int64(1234567), g.StartTimestamp())
	require.Equal(t, int32(4096), g.FilePageSize())
	require.Equal(t, 10*time.Second, g.ClientLivenessTimeout())
	require.Equal(t, int64(99), g.DriverHeartbeat())
	require.Equal(t, Path(dir), g.FilePath())
	c, err := g.Counters()
	require.NoError(t, err)
	require.Equal(t, int64(1234), c.CounterValue(0))
	require.Equal(t, "Bytes sent", c.CounterLabel(0))
	var obs []Observation
	_, err = ReadErrorLog(g.ErrorLogBuffer(), 0, func(o Observation) { obs = append(obs, o) })
	require.NoError(t, err)
	require.Equal(t, []Observation{{Count: 1, FirstTimestamp: 5, LastTimestamp: 5, Text: "boom"}}, obs)
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(dir)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.ErrorContains(t, err, "cnc: open "+filepath.Join(dir, "cnc.dat")+": no such file or directory")

	b := shm.Alloc(smallLayout().Length())
	_, err = Wrap(b)
	require.ErrorIs(t, err, ErrNotReady)
	_, err = Wrap(b[:100])
	require.ErrorContains(t, err, "100 bytes, shorter than the 128-byte CnC header")

	f, err := Init(b, smallLayout())
	require.NoError(t, err)
	require.Equal(t, "0.2.0", f.Version().String())

	bad := func(mutate func(c []byte)) error {
		c := shm.Alloc(len(b))
		copy(c, b)
		mutate(c)
		_, err := Wrap(c)
		return err
	}
	err = bad(func(c []byte) { le.PutUint32(c, uint32(ComposeSemanticVersion(1, 0, 0))) })
	require.ErrorIs(t, err, ErrIncompatible)
	require.ErrorContains(t, err, "CnC version not compatible: app=0.2.0 file=1.0.0")
	err = bad(func(c []byte) { le.PutUint32(c[ToDriverBufferLengthOffset:], 0x7ffffff8) })
	require.ErrorContains(t, err, "header describes")
	require.ErrorIs(t, err, ErrCorrupt)
	err = bad(func(c []byte) { le.PutUint32(c[ToDriverBufferLengthOffset:], 4096) })
	require.ErrorContains(t, err, "to-driver buffer length 4096 is not a power of two plus the 768-byte trailer")
	err = bad(func(c []byte) { le.PutUint32(c[ToClientsBufferLengthOffset:], 1000) })
	require.ErrorContains(t, err, "to-clients buffer length 1000 is not a power of two plus the 128-byte trailer")
	err = bad(func(c []byte) { le.PutUint32(c[ErrorLogBufferLengthOffset:], 0xfffffff0) })
	require.ErrorContains(t, err, "at offset 20: error_log_buffer_length -16 is not a non-negative multiple of 8")
	err = bad(func(c []byte) { le.PutUint32(c[CounterMetadataBufferLengthOffset:], 1024) })
	require.ErrorContains(t, err, "do not describe whole counters")

	_, err = Init(shm.Alloc(100), smallLayout())
	require.ErrorIs(t, err, ErrInvalidArgument)
	l := smallLayout()
	l.ToDriverCapacity = 1000
	_, err = Init(b, l)
	require.ErrorContains(t, err, "to-driver capacity 1000 is not a power of two")
	l = smallLayout()
	l.CounterValuesLength = 100
	_, err = Create(filepath.Join(dir, "x"), l)
	require.ErrorContains(t, err, "counter values length 100")
	require.Equal(t, 128+(1<<20+768)+(1<<20+128)+5*(1<<20)+(1<<20), DefaultLayout().Length()-3072, "the C driver's 8,392,704-byte file")
	require.Equal(t, 8392704, DefaultLayout().Length())
}

func newRing(t testing.TB, capacity int) *ManyToOneRingBuffer {
	rb, err := NewManyToOneRingBuffer(shm.Alloc(capacity + RingBufferTrailerLength))
	require.NoError(t, err)
	return rb
}

type message struct {
	typeID int32
	body   string
}

func drain(t testing.TB, rb *ManyToOneRingBuffer) []message {
	var out []message
	for {
		head := rb.ConsumerPosition()
		n, err := rb.Read(func(typeID int32, b []byte) { out = append(out, message{typeID, string(b)}) }, 100)
		require.NoError(t, err)
		if n == 0 && rb.ConsumerPosition() == head { // a read may consume only padding
			return out
		}
	}
}

func TestRingBuffer(t *testing.T) {
	_, err := NewManyToOneRingBuffer(shm.Alloc(1000))
	require.ErrorContains(t, err, "capacity 232 (length 1000 less the 768-byte trailer) is not a power of two")
	rb := newRing(t, 1024)
	require.Equal(t, 128, rb.MaxMessageLength())
	require.ErrorContains(t, rb.Write(0, nil), "message type id 0 must be greater than zero")
	require.ErrorContains(t, rb.Write(1, make([]byte, 129)), "encoded message length 129 exceeds the maximum of 128")
	require.NoError(t, rb.Write(7, []byte("abc")))
	require.NoError(t, rb.Write(8, nil))
	require.Equal(t, 16+8, rb.Size())
	require.Equal(t, []message{{7, "abc"}, {8, ""}}, drain(t, rb))
	require.Zero(t, rb.Size())
	require.Equal(t, make([]byte, 64), rb.Buffer()[:64], "the reader zeroes what it consumed")

	// Fill and wrap: 100-byte messages take 112 bytes.
	payload := bytes.Repeat([]byte{'x'}, 100)
	written := 0
	for rb.Write(3, payload) == nil {
		written++
	}
	require.Equal(t, (1024-24)/112, written)
	require.ErrorIs(t, rb.Write(3, payload), ErrInsufficientCapacity)
	require.Len(t, drain(t, rb), written)
	for i := 0; i < 20; i++ { // wraps several times, with padding records
		require.NoError(t, rb.Write(int32(10+i), []byte(fmt.Sprint(i, string(payload[:i*3])))))
		got := drain(t, rb)
		require.Equal(t, []message{{int32(10 + i), fmt.Sprint(i, string(payload[:i*3]))}}, got)
	}
	require.Greater(t, rb.ConsumerPosition(), int64(1024), "wrapped")
	require.Equal(t, int64(0), rb.NextCorrelationID())
	require.Equal(t, int64(1), rb.NextCorrelationID())
	require.Contains(t, rb.String(), "capacity: 1024")
}

func TestCorruptPositions(t *testing.T) {
	rb := newRing(t, 1024)
	shm.StoreInt64(rb.buf, rb.head, 154)
	_, err := rb.Read(func(int32, []byte) {}, 10)
	require.ErrorContains(t, err, "head position 154 is not 8-byte aligned")
	require.False(t, rb.Unblock())
	shm.StoreInt64(rb.buf, rb.head, 0)
	shm.StoreInt64(rb.buf, rb.tail, 13)
	_, err = rb.TryClaim(1, 4)
	require.ErrorContains(t, err, "head 0 and tail 13 are not valid positions")

	tx, b := newBroadcast(t, 1024)
	shm.StoreInt64(b, tx.latest, 12)
	_, err = NewBroadcastReceiver(b)
	require.ErrorContains(t, err, "latest counter 12 is not 8-byte aligned")
	shm.StoreInt64(b, tx.tail, 12)
	require.ErrorIs(t, tx.Transmit(1, nil), ErrCorrupt)
}

func TestRingBufferClaim(t *testing.T) {
	rb := newRing(t, 1024)
	i, err := rb.TryClaim(5, 4)
	require.NoError(t, err)
	copy(rb.Buffer()[i:], "wxyz")
	require.Empty(t, drain(t, rb), "not visible before commit")
	require.NoError(t, rb.Commit(i))
	require.ErrorContains(t, rb.Commit(i), "already committed or aborted")
	j, err := rb.TryClaim(6, 4)
	require.NoError(t, err)
	require.NoError(t, rb.Abort(j))
	require.NoError(t, rb.Write(7, []byte("k")))
	require.Equal(t, []message{{5, "wxyz"}, {7, "k"}}, drain(t, rb))
	require.ErrorContains(t, rb.Commit(3), "index 3 is not a claimed message")
	_, err = rb.TryClaim(0, 1)
	require.Error(t, err)
}

func TestRingBufferUnblock(t *testing.T) {
	rb := newRing(t, 1024)
	require.False(t, rb.Unblock(), "nothing to unblock")
	// A producer claimed and died before committing.
	_, err := rb.TryClaim(5, 10)
	require.NoError(t, err)
	require.NoError(t, rb.Write(6, []byte("after")))
	require.Empty(t, drain(t, rb), "the dead claim blocks the reader")
	require.True(t, rb.Unblock())
	require.Equal(t, []message{{6, "after"}}, drain(t, rb))

	// A producer moved the tail but died before writing the length.
	idx := rb.claimCapacity(24)
	require.NoError(t, rb.Write(7, []byte("later")))
	require.Zero(t, shm.LoadInt32(rb.buf, idx))
	require.Empty(t, drain(t, rb))
	require.True(t, rb.Unblock())
	require.Equal(t, []message{{7, "later"}}, drain(t, rb))
	require.False(t, rb.Unblock())
}

func TestRingBufferCorrupt(t *testing.T) {
	rb := newRing(t, 1024)
	require.NoError(t, rb.Write(1, []byte("ok")))
	shm.StoreInt32(rb.buf, 16, 5000)
	n, err := rb.Read(func(int32, []byte) {}, 10)
	require.Equal(t, 1, n)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "cnc: read ring buffer at offset 16: record length 5000 does not fit the 1008 bytes to the end of the buffer")
	shm.StoreInt32(rb.buf, 16, 3)
	_, err = rb.Read(func(int32, []byte) {}, 10)
	require.ErrorContains(t, err, "record length 3")
}

// TestRingBufferConcurrentProducers: producers write concurrently, as
// client processes do, while the driver reads; each producer's messages
// arrive complete and in order. Run with -race.
func TestRingBufferConcurrentProducers(t *testing.T) {
	rb := newRing(t, 4096)
	const producers, each = 4, 5000
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			msg := make([]byte, 8+p*9)
			for i := 0; i < each; {
				le.PutUint32(msg, uint32(p))
				le.PutUint32(msg[4:], uint32(i))
				if p%2 == 0 {
					if err := rb.Write(int32(100+p), msg); errors.Is(err, ErrInsufficientCapacity) {
						runtime.Gosched() // full: let the reader drain it
						continue
					} else if err != nil {
						t.Error(err)
						return
					}
				} else {
					idx, err := rb.TryClaim(int32(100+p), len(msg))
					if errors.Is(err, ErrInsufficientCapacity) {
						runtime.Gosched()
						continue
					}
					copy(rb.Buffer()[idx:], msg)
					rb.Commit(idx)
				}
				i++
			}
		}(p)
	}
	var done atomic.Bool
	go func() { wg.Wait(); done.Store(true) }()
	next := make([]int, producers)
	total := 0
	for total < producers*each {
		n, err := rb.Read(func(typeID int32, b []byte) {
			p := int(le.Uint32(b))
			i := int(le.Uint32(b[4:]))
			if p >= producers || typeID != int32(100+p) || i != next[p] || len(b) != 8+p*9 {
				t.Fatalf("producer %d message %d (want %d), type %d, %d bytes", p, i, next[p], typeID, len(b))
			}
			next[p]++
			total++
		}, 50)
		require.NoError(t, err)
		if n == 0 && done.Load() && rb.Size() == 0 {
			break
		}
		if n == 0 {
			runtime.Gosched()
		}
	}
	require.Equal(t, producers*each, total)
	ids := make(chan int64, 4000)
	var wg2 sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg2.Add(1)
		go func() {
			defer wg2.Done()
			for i := 0; i < 1000; i++ {
				ids <- rb.NextCorrelationID()
			}
		}()
	}
	wg2.Wait()
	close(ids)
	seen := map[int64]bool{}
	for id := range ids {
		require.False(t, seen[id], "correlation id %d minted twice", id)
		seen[id] = true
	}
}

func newBroadcast(t testing.TB, capacity int) (*BroadcastTransmitter, []byte) {
	b := shm.Alloc(capacity + BroadcastTrailerLength)
	tx, err := NewBroadcastTransmitter(b)
	require.NoError(t, err)
	return tx, b
}

func TestBroadcast(t *testing.T) {
	_, err := NewBroadcastTransmitter(shm.Alloc(1000))
	require.Error(t, err)
	_, err = NewBroadcastReceiver(shm.Alloc(1000))
	require.Error(t, err)
	tx, b := newBroadcast(t, 1024)
	require.Equal(t, 128, tx.MaxMessageLength())
	require.Equal(t, 1024, tx.Capacity())
	require.Error(t, tx.Transmit(0, nil))
	require.Error(t, tx.Transmit(1, make([]byte, 129)))
	rx, err := NewBroadcastReceiver(b)
	require.NoError(t, err)
	c := NewCopyBroadcastReceiver(rx)
	var got []message
	recv := func() int {
		n, err := c.Receive(func(typeID int32, m []byte) { got = append(got, message{typeID, string(m)}) })
		require.NoError(t, err)
		return n
	}
	require.Zero(t, recv())
	// Wrap around the buffer many times, with padding records.
	for i := 0; i < 200; i++ {
		m := fmt.Sprintf("message %d %s", i, bytes.Repeat([]byte{'.'}, i%50))
		require.NoError(t, tx.Transmit(int32(1+i%7), []byte(m)))
		require.Equal(t, 1, recv())
		require.Equal(t, message{int32(1 + i%7), m}, got[len(got)-1])
		require.Zero(t, recv())
	}
	require.Zero(t, rx.LappedCount())

	// A receiver that falls a whole buffer behind is told so and resumes
	// from the latest message.
	slow, err := NewBroadcastReceiver(b)
	require.NoError(t, err)
	sc := NewCopyBroadcastReceiver(slow)
	for i := 0; i < 40; i++ {
		require.NoError(t, tx.Transmit(9, bytes.Repeat([]byte{byte(i)}, 60)))
	}
	_, err = sc.Receive(func(int32, []byte) { t.Fatal("a lapped receiver must not deliver") })
	require.ErrorIs(t, err, ErrLapped)
	require.Equal(t, int64(1), slow.LappedCount())
	n, err := sc.Receive(func(int32, []byte) { t.Fatal("the latest record was skipped with the lap") })
	require.NoError(t, err)
	require.Zero(t, n)
	require.NoError(t, tx.Transmit(9, []byte("next")))
	n, err = sc.Receive(func(typeID int32, m []byte) { require.Equal(t, "next", string(m)) })
	require.NoError(t, err)
	require.Equal(t, 1, n, "it follows the transmitter again")
}

func TestBroadcastCorrupt(t *testing.T) {
	tx, b := newBroadcast(t, 1024)
	rx, err := NewBroadcastReceiver(b)
	require.NoError(t, err)
	require.NoError(t, tx.Transmit(1, []byte("x")))
	shm.StoreInt64(b, 0, 4000|1<<32)
	_, err = NewCopyBroadcastReceiver(rx).Receive(func(int32, []byte) {})
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "record length 4000 does not fit")
}

// TestBroadcastConcurrentReceivers: one transmitter, several receivers in
// parallel; every message a receiver delivers is intact, in order, and
// lapping is reported rather than delivering torn data. Run with -race.
func TestBroadcastConcurrentReceivers(t *testing.T) {
	tx, b := newBroadcast(t, 2048)
	const msgs = 20000
	var wg sync.WaitGroup
	var stop atomic.Bool
	var delivered atomic.Int64
	for r := 0; r < 3; r++ {
		rx, err := NewBroadcastReceiver(b)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := NewCopyBroadcastReceiver(rx)
			last := int64(-1)
			for !stop.Load() {
				n, err := c.Receive(func(typeID int32, m []byte) {
					seq := int64(le.Uint64(m))
					for _, x := range m[8:] {
						if x != byte(seq) {
							t.Errorf("torn message %d delivered", seq)
							return
						}
					}
					if seq <= last || int(typeID) != 1+int(seq%5) {
						t.Errorf("message %d after %d, type %d", seq, last, typeID)
					}
					last = seq
					delivered.Add(1)
				})
				if err != nil && !errors.Is(err, ErrLapped) {
					t.Error(err)
					return
				}
				if n == 0 {
					runtime.Gosched() // leave the CPUs to the transmitter
				}
			}
		}()
	}
	msg := make([]byte, 96)
	for i := 0; i < msgs+10; i++ {
		le.PutUint64(msg, uint64(i))
		for j := 8; j < len(msg[:8+i%88]); j++ {
			msg[j] = byte(i)
		}
		require.NoError(t, tx.Transmit(int32(1+i%5), msg[:8+i%88]))
		switch {
		case i >= msgs:
			time.Sleep(time.Millisecond) // a slow tail the receivers can keep up with
		case i%64 == 0:
			runtime.Gosched()
		}
	}
	for deadline := time.Now().Add(5 * time.Second); delivered.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	require.Positive(t, delivered.Load())
}

func TestCountersManager(t *testing.T) {
	meta, values := shm.Alloc(4*CounterMetadataLength), shm.Alloc(4*CounterValueLength)
	now := int64(1000)
	m, err := NewCountersManager(meta, values, 1000, func() int64 { return now })
	require.NoError(t, err)
	_, err = NewCountersManager(meta[:10], values, 1000, nil)
	require.Error(t, err)
	longLabel := string(bytes.Repeat([]byte{'L'}, 400))
	a, err := m.Allocate(TypeSenderPosition, bytes.Repeat([]byte{7}, 200), longLabel)
	require.NoError(t, err)
	require.Equal(t, int32(0), a)
	require.Len(t, m.CounterLabel(a), MaxLabelLength)
	require.Equal(t, bytes.Repeat([]byte{7}, MaxKeyLength), m.CounterKey(a))
	m.SetRegistrationID(a, 11)
	m.SetOwnerID(a, 12)
	m.SetReferenceID(a, 13)
	m.Value(a).Add(5)
	m.UpdateLabel(a, "snd-pos: x")
	var got []Counter
	m.ForEach(func(c Counter) bool { got = append(got, c); return true })
	require.Len(t, got, 1)
	require.Equal(t, Counter{ID: 0, TypeID: TypeSenderPosition, Value: 5, RegistrationID: 11, OwnerID: 12, ReferenceID: 13,
		Key: m.CounterKey(a), Label: "snd-pos: x"}, got[0])
	for i := 1; i < 4; i++ {
		id, err := m.Allocate(TypeSystem, nil, fmt.Sprint("c", i))
		require.NoError(t, err)
		require.Equal(t, int32(i), id)
	}
	_, err = m.Allocate(TypeSystem, nil, "one too many")
	require.ErrorContains(t, err, "max counter id (3) exceeded")

	require.NoError(t, m.Free(1))
	require.ErrorContains(t, m.Free(1), "counter 1 is not allocated")
	require.ErrorContains(t, m.Free(99), "counter 99 is not allocated")
	require.Equal(t, int32(RecordReclaimed), m.CounterState(1))
	require.Equal(t, int64(2000), m.FreeForReuseDeadline(1))
	got = nil
	m.ForEach(func(c Counter) bool { got = append(got, c); return true })
	require.Len(t, got, 3, "reclaimed counters are skipped, not the end")
	_, err = m.Allocate(TypeSystem, nil, "too soon")
	require.Error(t, err, "the freed id is not reusable before its deadline")
	now = 2000
	id, err := m.Allocate(TypeSystem, nil, "reused")
	require.NoError(t, err)
	require.Equal(t, int32(1), id)
	require.Zero(t, m.RegistrationID(1))
	require.Zero(t, m.CounterValue(1))
	require.Equal(t, int32(-1), m.CounterTypeID(99))
	require.Zero(t, m.CounterValue(-1))
	require.Nil(t, m.CounterKey(5))
	require.Empty(t, m.CounterLabel(5))
	require.Nil(t, m.Value(5))
}

func TestDistinctErrorLog(t *testing.T) {
	b := shm.Alloc(128)
	now := int64(10)
	l, err := NewDistinctErrorLog(b, func() int64 { return now })
	require.NoError(t, err)
	require.NoError(t, l.Record(1, "first error"))
	now = 20
	require.NoError(t, l.Record(1, "first error"))
	require.NoError(t, l.Record(2, "first error"), "a different code is a different error")
	require.ErrorIs(t, l.Record(3, string(bytes.Repeat([]byte{'e'}, 60))), ErrInsufficientCapacity)
	var obs []Observation
	n, err := ReadErrorLog(b, 0, func(o Observation) { obs = append(obs, o) })
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, []Observation{{2, 10, 20, "first error"}, {1, 20, 20, "first error"}}, obs)
	n, err = ReadErrorLog(b, 21, func(Observation) {})
	require.NoError(t, err)
	require.Zero(t, n)
	shm.StoreInt32(b, 0, 1000)
	_, err = ReadErrorLog(b, 0, func(Observation) {})
	require.ErrorContains(t, err, "cnc: read error log at offset 0: entry length 1000 does not fit the 128 bytes left")
}

func TestLossReport(t *testing.T) {
	b := shm.Alloc(256)
	r, err := NewLossReport(b)
	require.NoError(t, err)
	ch := "aeron:udp?endpoint=localhost:20121|cc=cubic"
	off, err := r.CreateEntry(1152, 100, 994871370, 1001, ch, "127.0.0.1:47945")
	require.NoError(t, err)
	require.Zero(t, off)
	r.RecordObservation(off, 1152, 200)
	off2, err := r.CreateEntry(64, 300, 1, 2, "aeron:ipc", "x")
	require.NoError(t, err)
	require.Equal(t, 128, off2, "entries are aligned to 64")
	_, err = r.CreateEntry(1, 1, 1, 1, string(bytes.Repeat([]byte{'c'}, 100)), "y")
	require.ErrorIs(t, err, ErrInsufficientCapacity)
	var got []LossEntry
	n, err := ReadLossReport(b, func(e LossEntry) { got = append(got, e) })
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, []LossEntry{
		{2, 2304, 100, 200, 994871370, 1001, ch, "127.0.0.1:47945"},
		{1, 64, 300, 300, 1, 2, "aeron:ipc", "x"},
	}, got)
	le.PutUint32(b[128+lrChannelOffset:], 500)
	_, err = ReadLossReport(b, func(LossEntry) {})
	require.ErrorContains(t, err, "at offset 128: channel length 500 does not fit the entry")
	require.Equal(t, filepath.Join("d", "loss-report.dat"), LossReportPath("d"))
}

func TestSemanticVersionAndNames(t *testing.T) {
	v := ComposeSemanticVersion(1, 48, 2)
	require.Equal(t, "1.48.2", v.String())
	require.Equal(t, uint8(1), v.Major())
	require.Equal(t, "ON_PUBLICATION_ERROR", MessageName(RspOnPublicationError))
	require.Equal(t, "GET_NEXT_AVAILABLE_SESSION_ID", MessageName(CmdGetNextAvailableSessionID))
	require.Empty(t, MessageName(0x777))
}
