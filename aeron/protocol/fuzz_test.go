package protocol

import (
	"testing"

	"github.com/ibgo/ibgo/aeron/internal/testvec"
)

// FuzzFrameDecode walks arbitrary datagrams frame by frame. Properties: no
// panic; every frame lies inside the datagram and Next advances; a frame
// that decodes re-encodes, and decoding the encoding gives the same fields
// (control frames re-encode with their canonical frame_length, DATA and PAD
// headers byte for byte).
func FuzzFrameDecode(f *testing.F) {
	for _, name := range []string{testvec.LossCubicPcap, testvec.ResponseChannelPcap} {
		seen := map[string]bool{}
		for _, dg := range datagrams(f, name) {
			// One seed per distinct (type, flags, length) shape.
			key := string(dg[4:8]) + string(rune(len(dg)))
			if !seen[key] {
				seen[key] = true
				f.Add(dg)
			}
		}
	}
	f.Fuzz(func(t *testing.T, dg []byte) {
		off := 0
		for off < len(dg) {
			fr, err := NextFrame(dg, off)
			if err != nil {
				return
			}
			if fr.Offset != off || fr.Next <= off || fr.Next > len(dg) || len(fr.Bytes) > fr.Next-off {
				t.Fatalf("frame at %d: next %d, %d bytes, datagram %d", off, fr.Next, len(fr.Bytes), len(dg))
			}
			checkRoundTrip(t, fr)
			off = fr.Next
		}
	})
}

func checkRoundTrip(t *testing.T, fr Frame) {
	out := make([]byte, len(fr.Bytes)+ErrorMaxFrameLength)
	switch fr.Header.Type {
	case TypeData, TypePad:
		var h, h2 DataHeader
		payload, err := h.DecodeFrame(fr.Bytes)
		if err != nil {
			return
		}
		n, err := h.Encode(out)
		if err != nil {
			t.Fatal(err)
		}
		if string(out[:n]) != string(fr.Bytes[:DataHeaderLength]) {
			t.Fatalf("data header re-encoded differently")
		}
		if h.Type == TypeData && !h.IsHeartbeat() {
			n, err = h.EncodeFrame(out, payload)
			if err != nil || string(out[:n]) != string(fr.Bytes[:h.FrameLength]) {
				t.Fatalf("data frame re-encoded differently: %v", err)
			}
		}
		if _, err := h2.DecodeFrame(out[:n]); err != nil || h2 != h {
			t.Fatalf("decode of encoding: %v %+v != %+v", err, h2, h)
		}
	case TypeSetup:
		var a, b Setup
		roundTrip(t, fr.Bytes, out, &a, &b, func() bool { a.FrameLength = b.FrameLength; return a == b })
	case TypeStatusMessage:
		var a, b StatusMessage
		roundTrip(t, fr.Bytes, out, &a, &b, func() bool { a.FrameLength = b.FrameLength; return a == b })
	case TypeNak:
		var a, b Nak
		roundTrip(t, fr.Bytes, out, &a, &b, func() bool { a.FrameLength = b.FrameLength; return a == b })
	case TypeRTTM:
		var a, b RTTMeasurement
		roundTrip(t, fr.Bytes, out, &a, &b, func() bool { a.FrameLength = b.FrameLength; return a == b })
	case TypeResponseSetup:
		var a, b ResponseSetup
		roundTrip(t, fr.Bytes, out, &a, &b, func() bool { a.FrameLength = b.FrameLength; return a == b })
	case TypeError:
		var a, b ErrorFrame
		roundTrip(t, fr.Bytes, out, &a, &b, func() bool {
			return a.FrameHeader.Flags == b.Flags && a.SessionID == b.SessionID && a.StreamID == b.StreamID &&
				a.ReceiverID == b.ReceiverID && a.GroupTag == b.GroupTag && a.ErrorCode == b.ErrorCode &&
				string(a.Message) == string(b.Message)
		})
	case TypeResolution:
		var r Resolution
		if r.Decode(fr.Bytes) != nil {
			return
		}
		for next := FrameHeaderLength; next < len(fr.Bytes); {
			e, n, err := NextResolutionEntry(fr.Bytes, next)
			if err != nil {
				return
			}
			if n <= next || n > len(fr.Bytes) {
				t.Fatalf("resolution entry at %d: next %d", next, n)
			}
			m, err := e.Encode(out)
			if err != nil {
				t.Fatal(err)
			}
			var e2 ResolutionEntry
			if _, err := e2.Decode(out[:m]); err != nil || string(e2.Name) != string(e.Name) || string(e2.Address) != string(e.Address) || e2.UDPPort != e.UDPPort {
				t.Fatalf("resolution entry round trip: %v", err)
			}
			next = n
		}
	}
}

type codec interface {
	Decode([]byte) error
	Encode([]byte) (int, error)
}

func roundTrip(t *testing.T, in, out []byte, a, b codec, equal func() bool) {
	if a.Decode(in) != nil {
		return
	}
	n, err := a.Encode(out)
	if err != nil {
		t.Fatalf("encode of a decoded frame: %v", err)
	}
	if err := b.Decode(out[:n]); err != nil {
		t.Fatalf("decode of encoding: %v", err)
	}
	if !equal() {
		t.Fatalf("round trip changed fields: %+v != %+v", a, b)
	}
}
