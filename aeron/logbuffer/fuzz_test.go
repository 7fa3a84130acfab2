package logbuffer

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/ibgo/ibgo/aeron/internal/testvec"
	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/internal/shm"
)

// FuzzTermScan runs the readers of a term over arbitrary term contents, as
// a subscriber or the driver would meet them in a corrupted or hostile
// shared file. Properties: no panic or out-of-range access; offsets stay in
// the term, frame aligned and monotonic; every delivered payload lies in
// the term; the sender never gets more than it asked for.
func FuzzTermScan(f *testing.F) {
	pub := testvec.MustBytes(testvec.PublicationLogBuffer)
	img := testvec.MustBytes(testvec.ImageLogBuffer)
	f.Add(pub[65536+25632-288*2:65536+25632+288*8], uint16(64), uint16(1408))
	f.Add(pub[2*65536:2*65536+4096], uint16(0), uint16(1408))
	f.Add(pub[65536+65376-1024:2*65536], uint16(0), uint16(4096))
	f.Add(img[2*65536+39456-2048:2*65536+39456+512], uint16(100), uint16(300))
	f.Fuzz(func(t *testing.T, data []byte, start uint16, maxLen uint16) {
		n := len(data) &^ (FrameAlignment - 1)
		if n == 0 {
			return
		}
		term := shm.Alloc(n)
		copy(term, data)
		offset := int32(start) % int32(n) &^ (FrameAlignment - 1)

		h := NewHeader(7, TermMinLength)
		last := offset - 1
		_, next, err := Read(term, offset, func(p []byte, hd *Header) {
			o := hd.Offset()
			if o <= last || o < offset || int(o)+protocol.DataHeaderLength+len(p) > n {
				t.Fatalf("fragment at %d (previous %d) with %d bytes in a %d-byte term", o, last, len(p), n)
			}
			last = o
			_ = hd.Position()
		}, math.MaxInt, &h)
		if next < offset || int(next) > n || (err == nil && next%FrameAlignment != 0) {
			t.Fatalf("read moved from %d to %d in a %d-byte term (err %v)", offset, next, n, err)
		}

		avail, pad := ScanForAvailability(term, offset, int32(maxLen))
		if avail > int32(maxLen) || (avail > 0 && int(offset)+int(avail) > n) {
			t.Fatalf("scan from %d, max %d: available %d in a %d-byte term", offset, maxLen, avail, n)
		}
		if avail > 0 && avail%FrameAlignment != 0 {
			t.Fatalf("available %d is not frame aligned", avail)
		}
		if avail <= 0 && pad != 0 {
			t.Fatalf("padding %d without available bytes", pad)
		}

		gap := ScanForGap(term, 1, offset, int32(n), func(_, o, l int32) {
			if o < offset || l <= 0 || int(o)+int(l) > n {
				t.Fatalf("gap %d+%d in a %d-byte term", o, l, n)
			}
		})
		if gap < offset || gap%FrameAlignment != 0 {
			t.Fatalf("gap scan from %d returned %d", offset, gap)
		}

		// The driver unblocks what it finds at a stalled consumer position:
		// whatever it pads must be a committed frame inside the term.
		hw, err := NewHeaderWriter(make([]byte, protocol.DataHeaderLength))
		if err != nil {
			t.Fatal(err)
		}
		if st := Unblock(&hw, term, offset, int32(maxLen), 1); st != NoAction {
			l := FrameLengthVolatile(term, offset)
			if l <= 0 || int64(offset)+int64(l) > int64(n) || !IsPaddingFrame(term, offset) {
				t.Fatalf("unblock at %d (%v) left a frame of length %d in a %d-byte term", offset, st, l, n)
			}
		}
	})
}

// FuzzTermAppendRead appends messages whose sizes and contents come from the
// input, fragmenting the long ones, and reads them back: what was appended
// is what is read, in order, across the end of the term.
func FuzzTermAppendRead(f *testing.F) {
	f.Add([]byte{0, 1, 255, 3, 0, 0, 1, 0}, uint8(1))
	f.Add(bytes.Repeat([]byte{200, 5}, 40), uint8(0))
	f.Add(binary.LittleEndian.AppendUint16(nil, 60000), uint8(3))
	f.Fuzz(func(t *testing.T, spec []byte, mtuSel uint8) {
		l, hw := newTestLog(t)
		a := NewTermAppender(l, 0)
		mtu := []int{96, 1408, 4096, 8192}[mtuSel%4]
		maxPayload := mtu - protocol.DataHeaderLength
		var want [][]byte
		for i := 0; i+1 < len(spec); i += 2 {
			n := int(binary.LittleEndian.Uint16(spec[i:]))
			msg := bytes.Repeat([]byte{byte(i)}, n)
			var next int32
			var err error
			if n <= maxPayload {
				next, err = a.AppendUnfragmentedMessage(&hw, msg, nil, testInitial)
			} else {
				next, err = a.AppendFragmentedMessage(&hw, msg, maxPayload, nil, testInitial)
			}
			if err != nil {
				t.Fatal(err)
			}
			if next == AppendFailed {
				break
			}
			want = append(want, msg)
		}
		h := NewHeader(testInitial, testTermLength)
		var got [][]byte
		var cur []byte
		_, end, err := Read(l.Term(0), 0, func(p []byte, hd *Header) {
			fl := hd.Flags()
			if fl&protocol.FlagBegin != 0 {
				cur = cur[:0]
			}
			cur = append(cur, p...)
			if fl&protocol.FlagEnd != 0 {
				got = append(got, append([]byte{}, cur...))
			}
		}, math.MaxInt, &h)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("appended %d messages, read %d", len(want), len(got))
		}
		for i := range want {
			if !bytes.Equal(want[i], got[i]) {
				t.Fatalf("message %d differs", i)
			}
		}
		if raw := TermOffset(a.RawTailVolatile(), testTermLength); raw != end && end != testTermLength {
			t.Fatalf("read ended at %d, tail at %d", end, raw)
		}
	})
}
