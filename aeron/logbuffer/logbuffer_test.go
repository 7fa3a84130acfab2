package logbuffer

import (
	"bytes"
	"errors"
	"math"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/internal/shm"
	"github.com/stretchr/testify/require"
)

const (
	testTermLength = 64 << 10
	testSession    = 77
	testStream     = 1001
	testInitial    = 1000
)

// newTestLog makes a publication log as the driver would: metadata, default
// header and the first term's tail.
func newTestLog(t testing.TB) (*LogBuffer, HeaderWriter) {
	t.Helper()
	l, err := New(shm.Alloc(int(ComputeLogLength(testTermLength, 4096))), testTermLength, 4096)
	require.NoError(t, err)
	m := l.Metadata()
	m.SetInitialTermID(testInitial)
	m.SetMTULength(1408)
	m.StoreDefaultDataHeader(testSession, testStream, testInitial)
	m.InitialiseTailWithTermID(0, testInitial)
	for i := 1; i < PartitionCount; i++ {
		m.InitialiseTailWithTermID(i, testInitial+int32(i)-PartitionCount)
	}
	hw, err := NewHeaderWriter(m.DefaultFrameHeader())
	require.NoError(t, err)
	return l, hw
}

func TestDescriptorMath(t *testing.T) {
	require.NoError(t, CheckTermLength(64<<10))
	require.ErrorContains(t, CheckTermLength(32<<10), "less than min length of 65536: length=32768")
	require.ErrorContains(t, CheckTermLength(2<<30), "greater than max length")
	require.ErrorContains(t, CheckTermLength(100000), "not a power of 2")
	require.NoError(t, CheckPageSize(4096))
	require.ErrorContains(t, CheckPageSize(1024), "less than min size")
	require.ErrorContains(t, CheckPageSize(2<<30), "greater than max size")
	require.ErrorContains(t, CheckPageSize(5000), "not a power of 2")
	require.Equal(t, int64(200704), ComputeLogLength(64<<10, 4096))
	require.Equal(t, int64(2<<20), ComputeLogLength(64<<10, 2<<20), "rounded up to a huge page")
	require.Equal(t, 16, PositionBitsToShift(65536))
	require.Equal(t, int64(3*65536+100), ComputePosition(13, 100, 16, 10))
	require.Equal(t, int64(65536+100), ComputePosition(math.MinInt32, 100, 16, math.MaxInt32), "term ids wrap")
	require.Equal(t, int32(13), ComputeTermIDFromPosition(3*65536+100, 16, 10))
	require.Equal(t, int32(100), ComputeTermOffsetFromPosition(3*65536+100, 16))
	require.Equal(t, int64(3*65536), ComputeTermBeginPosition(13, 16, 10))
	require.Equal(t, 1, IndexByTerm(10, 13+1))
	require.Equal(t, 2, IndexByTerm(-5, -3))
	require.Equal(t, 2, IndexByTerm(10, 9), "a negative count maps into 0..2")
	require.Equal(t, 2, IndexByTermCount(47))
	require.Equal(t, 2, IndexByPosition(47*65536+5, 16))
	raw := PackTail(-848725852, 58464)
	require.Equal(t, int32(-848725852), TermID(raw))
	require.Equal(t, int32(58464), TermOffset(raw, 65536))
	require.Equal(t, int32(7), ComputeTermCount(math.MinInt32+6, math.MaxInt32))
}

func TestWrapErrors(t *testing.T) {
	_, err := Wrap(shm.Alloc(100))
	require.ErrorContains(t, err, "100 bytes cannot hold the 4096-byte metadata section")
	b := shm.Alloc(200704)
	_, err = Wrap(b)
	require.ErrorContains(t, err, "metadata invalid: logbuffer: term length less than min")
	_, err = New(b, 64<<10, 4096)
	require.NoError(t, err)
	_, err = Wrap(b[4096:])
	require.ErrorContains(t, err, "196608 bytes is less than 3 terms of 65536 plus metadata (200704)")
	odd := shm.Alloc(len(b) + 8)[4 : 4+len(b)]
	copy(odd, b)
	_, err = Wrap(odd)
	require.ErrorContains(t, err, "8-byte aligned")
	_, err = New(b, 128<<10, 4096)
	require.ErrorContains(t, err, "less than the 397312 a log of 131072-byte terms needs")
	_, err = New(b, 1000, 4096)
	require.Error(t, err)
	_, err = New(b, 64<<10, 3)
	require.Error(t, err)
	le.PutUint32(b[len(b)-MetadataLength+PageSizeOffset:], 3)
	_, err = Wrap(b)
	require.ErrorContains(t, err, "page size less than min size")
}

func TestCreateOpenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "1.logbuffer")
	l, err := Create(path, 64<<10, 4096)
	require.NoError(t, err)
	l.Metadata().SetCorrelationID(42)
	l.Metadata().InitialiseTailWithTermID(0, 7)
	require.NoError(t, l.Close())
	require.NoError(t, l.Close())
	r, err := Open(path, false)
	require.NoError(t, err)
	require.Equal(t, int64(42), r.Metadata().CorrelationID())
	require.Equal(t, int32(7), TermID(r.Metadata().RawTailVolatile(0)))
	require.NoError(t, r.Close())
	_, err = Open(filepath.Join(t.TempDir(), "none"), false)
	require.Error(t, err)
	_, err = Create(path, 3, 4096)
	require.Error(t, err)
}

func TestMetadataAccessors(t *testing.T) {
	l, _ := newTestLog(t)
	m := l.Metadata()
	m.SetEndOfStreamPosition(99)
	require.Equal(t, int64(99), m.EndOfStreamPosition())
	m.SetIsConnected(true)
	require.True(t, m.IsConnected())
	m.SetIsConnected(false)
	require.False(t, m.IsConnected())
	m.SetActiveTransportCount(2)
	require.Equal(t, int32(2), m.ActiveTransportCount())
	m.SetGroup(true)
	m.SetTether(true)
	m.SetSparse(true)
	m.SetIsResponse(true)
	m.SetRejoin(true)
	m.SetReliable(true)
	m.SetSignalEOS(true)
	m.SetSpiesSimulateConnection(true)
	m.SetIsPublicationRevoked(true)
	m.SetLogType(LogTypeImage)
	m.SetUntetheredLingerTimeoutNs(123)
	m.SetMaxResend(16)
	m.SetPublicationWindowLength(32768)
	m.SetReceiverWindowLength(1 << 17)
	m.SetSocketSndbufLength(1)
	m.SetSocketRcvbufLength(2)
	m.SetOSMaxSocketSndbufLength(3)
	m.SetOSMaxSocketRcvbufLength(4)
	m.SetOSDefaultSocketSndbufLength(5)
	m.SetOSDefaultSocketRcvbufLength(6)
	m.SetEntityTag(7)
	m.SetResponseCorrelationID(8)
	m.SetLingerTimeoutNs(9)
	m.SetUntetheredWindowLimitTimeoutNs(10)
	m.SetUntetheredRestingTimeoutNs(11)
	b := m.Bytes()
	require.Equal(t, []byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 2}, b[GroupOffset:LogTypeOffset+1])
	require.Equal(t, uint64(123), le.Uint64(b[500:]))
	require.Equal(t, int32(16), m.MaxResend())
	require.Equal(t, []int32{32768, 1 << 17, 1, 5, 3, 2, 6, 4}, []int32{m.PublicationWindowLength(), m.ReceiverWindowLength(),
		m.SocketSndbufLength(), m.OSDefaultSocketSndbufLength(), m.OSMaxSocketSndbufLength(), m.SocketRcvbufLength(),
		m.OSDefaultSocketRcvbufLength(), m.OSMaxSocketRcvbufLength()})
	require.Equal(t, []int64{7, 8, 9, 10, 11, 123}, []int64{m.EntityTag(), m.ResponseCorrelationID(), m.LingerTimeoutNs(),
		m.UntetheredWindowLimitTimeoutNs(), m.UntetheredRestingTimeoutNs(), m.UntetheredLingerTimeoutNs()})
	require.True(t, m.Group() && m.Tether() && m.Sparse() && m.IsResponse() && m.Rejoin() && m.Reliable() && m.SignalEOS() && m.SpiesSimulateConnection() && m.IsPublicationRevoked())
	require.Equal(t, LogTypeImage, m.LogType())
	require.Error(t, m.StoreDefaultFrameHeader(make([]byte, 129)))
	_, err := NewMetadata(make([]byte, 10))
	require.Error(t, err)
	_, err = NewHeaderWriter(make([]byte, 8))
	require.Error(t, err)
}

type msg struct {
	data     []byte
	flags    uint8
	termID   int32
	offset   int32
	reserved int64
}

func readAll(t testing.TB, l *LogBuffer, partition int, from int32) ([]msg, int32) {
	t.Helper()
	h := NewHeader(testInitial, testTermLength)
	var out []msg
	_, off, err := Read(l.Term(partition), from, func(p []byte, hd *Header) {
		out = append(out, msg{append([]byte{}, p...), hd.Flags(), hd.TermID(), hd.Offset(), hd.ReservedValue()})
		if hd.SessionID() != testSession || hd.StreamID() != testStream || hd.Type() != protocol.TypeData || hd.TermOffset() != hd.Offset() {
			t.Fatalf("bad header at %d", hd.Offset())
		}
	}, math.MaxInt, &h)
	require.NoError(t, err)
	return out, off
}

func TestAppendUnfragmented(t *testing.T) {
	l, hw := newTestLog(t)
	a := NewTermAppender(l, 0)
	var want []msg
	off := int32(0)
	for i, n := range []int{0, 1, 31, 32, 100, 256, 1376} {
		p := bytes.Repeat([]byte{byte(i + 1)}, n)
		rvs := func(term []byte, o, fl int32) int64 { return int64(o)<<8 | int64(fl) }
		next, err := a.AppendUnfragmentedMessage(&hw, p, rvs, testInitial)
		require.NoError(t, err)
		require.Equal(t, off+protocol.AlignedFrameLength(int32(n)+32), next)
		want = append(want, msg{p, protocol.FlagsUnfragmented, testInitial, off, int64(off)<<8 | int64(n+32)})
		off = next
	}
	got, end := readAll(t, l, 0, 0)
	require.Equal(t, want, got)
	require.Equal(t, off, end)
	require.Equal(t, PackTail(testInitial, off), a.RawTailVolatile())
	// A message for another term id: the append was delayed past a rotation.
	_, err := a.AppendUnfragmentedMessage(&hw, []byte("x"), nil, testInitial+1)
	var te *TermIDError
	require.ErrorAs(t, err, &te)
	require.Equal(t, TermIDError{Expected: testInitial + 1, Actual: testInitial}, *te)
	require.ErrorContains(t, err, "action possibly delayed")
}

func TestAppendFragmented(t *testing.T) {
	l, hw := newTestLog(t)
	a := NewTermAppender(l, 0)
	_, err := a.AppendFragmentedMessage(&hw, nil, 100, nil, testInitial)
	require.ErrorContains(t, err, "max payload length 100 must be a positive multiple of 32")
	const maxPayload = 1408 - 32
	for _, n := range []int{maxPayload + 1, 3 * maxPayload, 5000} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i * 13)
		}
		start := TermOffset(a.RawTailVolatile(), testTermLength)
		next, err := a.AppendFragmentedMessage(&hw, src, maxPayload, nil, testInitial)
		require.NoError(t, err)
		frags, _ := readAll(t, l, 0, start)
		wantFrags := (n + maxPayload - 1) / maxPayload
		require.Len(t, frags, wantFrags)
		var joined []byte
		for i, f := range frags {
			var flags uint8
			if i == 0 {
				flags |= protocol.FlagBegin
			}
			if i == wantFrags-1 {
				flags |= protocol.FlagEnd
			} else {
				require.Len(t, f.data, maxPayload)
			}
			require.Equal(t, flags, f.flags, "fragment %d of %d", i, wantFrags)
			joined = append(joined, f.data...)
		}
		require.Equal(t, src, joined)
		last := frags[len(frags)-1]
		require.Equal(t, next, last.offset+protocol.AlignedFrameLength(int32(len(last.data))+32))
	}
}

func TestClaimCommitAbortPadding(t *testing.T) {
	l, hw := newTestLog(t)
	a := NewTermAppender(l, 0)
	var c BufferClaim
	next, err := a.Claim(&hw, 10, &c, testInitial)
	require.NoError(t, err)
	require.Equal(t, int32(64), next)
	copy(c.Buffer(), "0123456789")
	c.SetReservedValue(-5)
	c.SetFlags(protocol.FlagBegin | protocol.FlagEnd | protocol.FlagEOS)
	// Not committed yet: readers see nothing.
	got, end := readAll(t, l, 0, 0)
	require.Empty(t, got)
	require.Zero(t, end)
	require.Equal(t, int32(-42), FrameLengthVolatile(l.Term(0), 0))
	c.Commit()
	got, _ = readAll(t, l, 0, 0)
	require.Equal(t, []msg{{[]byte("0123456789"), 0xe0, testInitial, 0, -5}}, got)

	_, err = a.Claim(&hw, 100, &c, testInitial)
	require.NoError(t, err)
	c.Abort()
	next, err = a.AppendPadding(&hw, 64, testInitial)
	require.NoError(t, err)
	require.Equal(t, int32(64+160+96), next)
	_, err = a.AppendUnfragmentedMessage(&hw, []byte("after"), nil, testInitial)
	require.NoError(t, err)
	got, end = readAll(t, l, 0, 0)
	require.Len(t, got, 2, "aborted claims and padding are skipped")
	require.Equal(t, []byte("after"), got[1].data)
	require.Equal(t, int32(64+160+96+64), end)
	require.True(t, IsPaddingFrame(l.Term(0), 64))
	require.True(t, IsPaddingFrame(l.Term(0), 224))
}

// TestEndOfTermAndRotation fills a term until an append fails, checks the
// padding written to its end, rotates and carries on in the next term, the
// way a publication's offer does.
func TestEndOfTermAndRotation(t *testing.T) {
	l, hw := newTestLog(t)
	m := l.Metadata()
	payload := make([]byte, 1000) // 1056-byte frames: 62 fit, 65536-62*1056 = 64 bytes left
	termCount := int32(0)
	termID := int32(testInitial)
	appended := 0
	for rotations := 0; rotations < 5; {
		p := m.ActivePartitionIndex()
		a := NewTermAppender(l, p)
		next, err := a.AppendUnfragmentedMessage(&hw, payload, nil, termID)
		require.NoError(t, err)
		if next == AppendFailed {
			require.True(t, IsPaddingFrame(a.Term(), 62*1056))
			require.Equal(t, int32(64), FrameLengthVolatile(a.Term(), 62*1056))
			got, end := readAll(t, l, p, 0)
			require.Len(t, got, 62)
			require.Equal(t, int32(testTermLength), end)
			require.True(t, m.RotateLog(termCount, termID))
			require.False(t, m.RotateLog(termCount, termID), "a second rotation of the same term loses the race")
			termCount++
			termID++
			require.Equal(t, termCount, m.ActiveTermCount())
			require.Equal(t, PackTail(termID, 0), m.RawTailActive())
			rotations++
			// The appender of the new partition would clean it in a real
			// driver; here each partition is reused after three rotations.
			if rotations >= 2 {
				clear(l.Term(m.ActivePartitionIndex()))
			}
			continue
		}
		appended++
	}
	require.Equal(t, 5*62, appended)
	// A further failed claim leaves the tail beyond the term; readers clamp.
	a := NewTermAppender(l, m.ActivePartitionIndex())
	for {
		next, err := a.AppendUnfragmentedMessage(&hw, payload, nil, termID)
		require.NoError(t, err)
		if next == AppendFailed {
			break
		}
	}
	next, err := a.AppendUnfragmentedMessage(&hw, payload, nil, termID)
	require.NoError(t, err)
	require.Equal(t, AppendFailed, next)
	require.Greater(t, a.RawTailVolatile()&0xffffffff, int64(testTermLength))
	require.Equal(t, int32(testTermLength), TermOffset(a.RawTailVolatile(), testTermLength))
}

// TestConcurrentAppendAndRead has several writers append through term
// rotations while a reader follows the log. The reader plays the driver's
// part too: it publishes a publication limit half a term ahead of itself
// (pub-lmt) and cleans each partition once it has read past it. Every
// message arrives once, intact, and each writer's messages in order. Run
// with -race to check the commit protocol.
//
// A writer delayed between reading the tail and claiming can claim in a
// term that rotated in under it (TermIDError): that claim is never written,
// and the reader unblocks it as the driver does after its unblock timeout.
// Each unblock must be accounted for by such a delayed claim.
func TestConcurrentAppendAndRead(t *testing.T) {
	l, hw := newTestLog(t)
	m := l.Metadata()
	const writers, perWriter = 4, 3000
	bits := PositionBitsToShift(testTermLength)
	var limit, delayed atomic.Int64
	limit.Store(testTermLength / 2)
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			p := make([]byte, 64+w*50)
			for i := 0; i < perWriter; {
				p[0] = byte(w)
				le.PutUint32(p[2:], uint32(i))
				count := m.ActiveTermCount()
				idx := IndexByTermCount(int64(count))
				raw := m.RawTailVolatile(idx)
				termID := TermID(raw)
				if count != termID-testInitial {
					continue // rotation in progress: ADMIN_ACTION, as offer returns
				}
				if ComputePosition(termID, TermOffset(raw, testTermLength), bits, testInitial) >= limit.Load() {
					runtime.Gosched() // back pressured
					continue
				}
				next, err := NewTermAppender(l, idx).AppendUnfragmentedMessage(&hw, p, nil, termID)
				var te *TermIDError
				switch {
				case errors.As(err, &te):
					delayed.Add(1)
					continue // rotated under us: retry, as offer does after ADMIN_ACTION
				case err != nil:
					t.Error(err)
					return
				case next == AppendFailed:
					m.RotateLog(count, termID)
					continue
				}
				i++
			}
		}(w)
	}

	seen := make([]int, writers)
	total := 0
	h := NewHeader(testInitial, testTermLength)
	var position int64
	deadline := time.Now().Add(time.Minute)
	// A claim left unwritten for this long is one a delayed writer gave up
	// (a live writer commits within microseconds; the driver waits 15 s).
	const unblockAfter = time.Second
	stalledSince := time.Now()
	unblocks := 0
	for total < writers*perWriter {
		require.True(t, time.Now().Before(deadline), "reader stalled at position %d with %d messages", position, total)
		termID := ComputeTermIDFromPosition(position, bits, testInitial)
		p := IndexByTerm(testInitial, termID)
		off := ComputeTermOffsetFromPosition(position, bits)
		_, next, err := Read(l.Term(p), off, func(b []byte, hd *Header) {
			w := int(b[0])
			i := int(le.Uint32(b[2:]))
			if w >= writers || i != seen[w] || len(b) != 64+w*50 || hd.TermID() != termID {
				t.Fatalf("writer %d message %d (want %d), %d bytes, term %d", w, i, seen[w], len(b), hd.TermID())
			}
			seen[w]++
			total++
		}, 100, &h)
		require.NoError(t, err)
		position += int64(next - off)
		if next == testTermLength {
			clear(l.Term(p)) // read past: clean it for its reuse three terms on
		}
		switch raw := m.RawTailVolatile(p); {
		case next != off:
			stalledSince = time.Now()
		case time.Since(stalledSince) < unblockAfter || TermID(raw) != termID || TermOffset(raw, testTermLength) <= off:
			runtime.Gosched()
		default: // stalled with the tail beyond: a claim nobody will write
			if st := Unblock(&hw, l.Term(p), off, TermOffset(raw, testTermLength), termID); st != NoAction {
				unblocks++
				t.Logf("unblocked term %d offset %d (%v)", termID, off, st)
			}
			stalledSince = time.Now()
		}
		limit.Store(position + testTermLength/2)
	}
	wg.Wait()
	for w := range seen {
		require.Equal(t, perWriter, seen[w])
	}
	require.LessOrEqual(t, int64(unblocks), delayed.Load(), "an unblock not caused by a delayed claim")
	require.Greater(t, m.ActiveTermCount(), int32(PartitionCount), "the test must rotate through every partition")
}

func TestScanForAvailability(t *testing.T) {
	l, hw := newTestLog(t)
	a := NewTermAppender(l, 0)
	for i := 0; i < 5; i++ {
		_, err := a.AppendUnfragmentedMessage(&hw, make([]byte, 256), nil, testInitial) // 288 each
		require.NoError(t, err)
	}
	term := l.Term(0)
	for _, tc := range []struct{ off, max, avail, pad int32 }{
		{0, 1408, 1152, 0},
		{0, 100, -288, 0}, // the first frame alone exceeds the limit
		{0, 288, 288, 0},
		{288 * 4, 1408, 288, 0},
		{288 * 5, 1408, 0, 0},
		{33, 1408, 0, 0},
		{-32, 1408, 0, 0},
		{testTermLength, 1408, 0, 0},
	} {
		avail, pad := ScanForAvailability(term, tc.off, tc.max)
		require.Equal(t, tc.avail, avail, "%+v", tc)
		require.Equal(t, tc.pad, pad, "%+v", tc)
	}
	_, err := a.AppendPadding(&hw, 1000, testInitial)
	require.NoError(t, err)
	avail, pad := ScanForAvailability(term, 288*4, 1408)
	require.Equal(t, int32(288+32), avail)
	require.Equal(t, int32(protocol.Align(1032, 32)-32), pad)
}

func TestInsertErrors(t *testing.T) {
	term := shm.Alloc(1024)
	require.ErrorContains(t, Insert(term, 0, make([]byte, 20)), "shorter than a 32-byte frame header")
	require.ErrorContains(t, Insert(term, 16, make([]byte, 32)), "term offset 16 is not a non-negative multiple of 32")
	require.ErrorContains(t, Insert(term, -32, make([]byte, 32)), "term offset -32")
	require.ErrorContains(t, Insert(term, 1000&^31, make([]byte, 64)), "overrun the 1024-byte term")
	pkt := make([]byte, 64)
	(&protocol.DataHeader{FrameHeader: protocol.FrameHeader{FrameLength: 40, Type: protocol.TypeData}, TermOffset: 64}).Encode(pkt)
	copy(pkt[32:], "payload!")
	require.NoError(t, Insert(term, 64, pkt))
	require.Equal(t, pkt, term[64:128])
	other := bytes.Repeat([]byte{0xff}, 64)
	require.NoError(t, Insert(term, 64, other))
	require.Equal(t, pkt, term[64:128], "an existing frame is kept")
}

func TestScanForGap(t *testing.T) {
	term := shm.Alloc(4096)
	put := func(off, length int32) {
		pkt := make([]byte, protocol.Align(int(length), 32))
		(&protocol.DataHeader{FrameHeader: protocol.FrameHeader{FrameLength: length, Type: protocol.TypeData}, TermOffset: off}).Encode(pkt)
		require.NoError(t, Insert(term, off, pkt))
	}
	put(0, 64)
	put(64, 100) // 128 aligned: ends at 192
	put(512, 64)
	put(1024, 32)
	type gap struct{ id, off, n int32 }
	var gaps []gap
	on := func(id, off, n int32) { gaps = append(gaps, gap{id, off, n}) }
	require.Equal(t, int32(192), ScanForGap(term, 9, 0, 2048, on))
	require.Equal(t, []gap{{9, 192, 320}}, gaps)
	gaps = nil
	require.Equal(t, int32(576), ScanForGap(term, 9, 512, 2048, on))
	require.Equal(t, []gap{{9, 576, 448}}, gaps)
	gaps = nil
	require.Equal(t, int32(1056), ScanForGap(term, 9, 1024, 1056, on), "no gap before the limit")
	require.Empty(t, gaps)
	require.Equal(t, int32(1056), ScanForGap(term, 9, 1024, 1100, nil), "a nil handler is allowed")
	require.Equal(t, int32(33), ScanForGap(term, 9, 33, 1100, on), "unaligned offsets are refused")
	require.Equal(t, int32(1056), ScanForGap(term, 9, 1024, 1<<20, on), "the limit is clamped to the term")
	require.Equal(t, []gap{{9, 1056, 4096 - 1056}}, gaps)
}

func TestReadCorruptFrame(t *testing.T) {
	term := shm.Alloc(1024)
	FrameLengthOrdered(term, 0, 2000)
	h := NewHeader(0, 65536)
	n, off, err := Read(term, 0, func([]byte, *Header) { t.Fatal("no fragment expected") }, 10, &h)
	var ce *CorruptFrameError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, CorruptFrameError{TermOffset: 0, FrameLength: 2000, TermLength: 1024}, *ce)
	require.Zero(t, n)
	require.Zero(t, off)
	FrameLengthOrdered(term, 0, 8)
	_, _, err = Read(term, 0, func([]byte, *Header) {}, 10, &h)
	require.ErrorContains(t, err, "frame_length 8 does not fit a 1024-byte term")
	_, _, err = Read(term, 20, func([]byte, *Header) {}, 10, &h)
	require.ErrorContains(t, err, "term offset 20 is not a frame boundary")

	l, hw := newTestLog(t)
	l.Metadata().SetRawTailOrdered(0, PackTail(testInitial, 40))
	_, err = NewTermAppender(l, 0).AppendUnfragmentedMessage(&hw, []byte("x"), nil, testInitial)
	require.ErrorAs(t, err, &ce, "a corrupted, unaligned tail is refused")
}

func TestHotPathsDoNotAllocate(t *testing.T) {
	l, hw := newTestLog(t)
	a := NewTermAppender(l, 0)
	payload := make([]byte, 256)
	h := NewHeader(testInitial, testTermLength)
	var sum int
	handler := func(p []byte, _ *Header) { sum += len(p) }
	var c BufferClaim
	off := int32(0)
	allocs := testing.AllocsPerRun(100, func() {
		next, err := a.AppendUnfragmentedMessage(&hw, payload, nil, testInitial)
		if err != nil || next == AppendFailed {
			panic("append")
		}
		if _, err := a.Claim(&hw, 256, &c, testInitial); err != nil {
			panic(err)
		}
		c.Commit()
		if _, next, err = Read(l.Term(0), off, handler, 10, &h); err != nil {
			panic(err)
		}
		off = next
		ScanForAvailability(l.Term(0), 0, 1408)
	})
	require.Zero(t, allocs)
	require.Positive(t, sum)
}

func BenchmarkTermAppend256(b *testing.B) {
	l, hw := newTestLog(b)
	payload := make([]byte, 256)
	a := NewTermAppender(l, 0)
	b.SetBytes(256)
	b.ReportAllocs()
	for b.Loop() {
		next, _ := a.AppendUnfragmentedMessage(&hw, payload, nil, testInitial)
		if next == AppendFailed {
			b.StopTimer()
			clear(l.Term(0))
			l.Metadata().InitialiseTailWithTermID(0, testInitial)
			b.StartTimer()
		}
	}
}

// BenchmarkExclusiveTermAppend256 is BenchmarkTermAppend256 for the
// single writer of an exclusive publication: no atomic claim, the tail
// published with a release store.
func BenchmarkExclusiveTermAppend256(b *testing.B) {
	l, hw := newTestLog(b)
	payload := make([]byte, 256)
	a := NewExclusiveTermAppender(l, 0)
	off := int32(0)
	b.SetBytes(256)
	b.ReportAllocs()
	for b.Loop() {
		next := a.AppendUnfragmentedMessage(&hw, testInitial, off, payload)
		if next == AppendFailed {
			next = 0 // the rest of the term was padded: start over
		}
		off = next
	}
}

func BenchmarkTermRead256(b *testing.B) {
	l, hw := newTestLog(b)
	a := NewTermAppender(l, 0)
	payload := make([]byte, 256)
	for {
		next, _ := a.AppendUnfragmentedMessage(&hw, payload, nil, testInitial)
		if next == AppendFailed {
			break
		}
	}
	term := l.Term(0)
	h := NewHeader(testInitial, testTermLength)
	var sum int
	handler := func(p []byte, _ *Header) { sum += len(p) }
	off := int32(0)
	b.SetBytes(256)
	b.ReportAllocs()
	for b.Loop() {
		_, next, _ := Read(term, off, handler, 1, &h)
		if next >= 227*288 {
			next = 0
		}
		off = next
	}
	if sum == 0 {
		b.Fatal("nothing read")
	}
}

func TestUnblock(t *testing.T) {
	frame := int32(protocol.AlignedFrameLength(protocol.DataHeaderLength + 64)) // 96
	setup := func(t *testing.T) (HeaderWriter, []byte) {
		l, hw := newTestLog(t)
		a := NewTermAppender(l, 0)
		for i := 0; i < 4; i++ {
			_, err := a.AppendUnfragmentedMessage(&hw, make([]byte, 64), nil, testInitial)
			require.NoError(t, err)
		}
		return hw, l.Term(0)
	}
	// readAll reads from offset until no progress: messages delivered and
	// the offset reached.
	readAll := func(t *testing.T, term []byte, from int32) (int, int32) {
		h := NewHeader(testInitial, testTermLength)
		n, off := 0, from
		for {
			_, next, err := Read(term, off, func([]byte, *Header) { n++ }, 100, &h)
			require.NoError(t, err)
			if next == off {
				return n, off
			}
			off = next
		}
	}

	t.Run("uncommitted header keeps its length", func(t *testing.T) {
		hw, term := setup(t)
		hw.Write(term, frame, 90, testInitial) // header written, never committed
		n, off := readAll(t, term, 0)
		require.Equal(t, 1, n)
		require.Equal(t, frame, off)
		require.Equal(t, Unblocked, Unblock(&hw, term, frame, 4*frame, testInitial))
		require.True(t, IsPaddingFrame(term, frame))
		require.Equal(t, int32(90), FrameLengthVolatile(term, frame))
		n, off = readAll(t, term, off)
		require.Equal(t, 2, n, "the frames behind the padding are delivered")
		require.Equal(t, 4*frame, off)
	})
	t.Run("zeroed claims padded to the next frame", func(t *testing.T) {
		hw, term := setup(t)
		clear(term[frame : 3*frame]) // two claims never written
		require.Equal(t, Unblocked, Unblock(&hw, term, frame, 4*frame, testInitial))
		require.True(t, IsPaddingFrame(term, frame))
		require.Equal(t, 2*frame, FrameLengthVolatile(term, frame))
		require.Equal(t, int32(testInitial), int32(le.Uint32(term[frame+20:])), "term id in the padding")
		require.Equal(t, frame, int32(le.Uint32(term[frame+8:])), "term offset in the padding")
		n, off := readAll(t, term, 0)
		require.Equal(t, 2, n)
		require.Equal(t, 4*frame, off)
	})
	t.Run("zeroed to the end of the term", func(t *testing.T) {
		hw, term := setup(t)
		clear(term[3*frame : 4*frame])
		require.Equal(t, UnblockedToEnd, Unblock(&hw, term, 3*frame, testTermLength, testInitial))
		require.Equal(t, testTermLength-3*frame, FrameLengthVolatile(term, 3*frame))
		_, off := readAll(t, term, 0)
		require.Equal(t, int32(testTermLength), off)
	})
	t.Run("nothing to do", func(t *testing.T) {
		hw, term := setup(t)
		before := bytes.Clone(term)
		require.Equal(t, NoAction, Unblock(&hw, term, frame, 4*frame, testInitial), "a committed frame")
		require.Equal(t, NoAction, Unblock(&hw, term, 4*frame, 5*frame, testInitial), "zeroed up to a tail short of the end: a claim may still be written")
		require.Equal(t, NoAction, Unblock(&hw, term, frame+8, 4*frame, testInitial), "unaligned")
		require.Equal(t, NoAction, Unblock(&hw, term, -32, 4*frame, testInitial), "negative")
		require.Equal(t, NoAction, Unblock(&hw, term, testTermLength, testTermLength, testInitial), "at the end")
		le.PutUint32(term[4*frame:], uint32(0x80000000)) // corrupt: -2^31
		require.Equal(t, NoAction, Unblock(&hw, term, 4*frame, 5*frame, testInitial), "a length that runs off the term")
		le.PutUint32(term[4*frame:], 0)
		require.Equal(t, before, term)
	})
}
