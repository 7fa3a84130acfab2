package inspect

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ibgo/ibgo/aeron/pcap"
	"github.com/ibgo/ibgo/aeron/protocol"
)

// DecodeOptions select what Decode prints.
type DecodeOptions struct {
	// Port keeps only datagrams from or to this UDP port; 0 keeps all.
	Port uint16
}

// DecodeSummary counts what a capture held.
type DecodeSummary struct {
	Packets   int            // records in the capture
	Datagrams int            // UDP datagrams decoded as Aeron
	Frames    int            // frames found in them
	Malformed int            // frames or packets that could not be decoded
	NotUDP    int            // packets that were not UDP over IP
	Filtered  int            // UDP datagrams skipped by the port filter
	Fragments int            // IP fragments still waiting for the rest at the end
	Types     map[string]int // frames per type label (DATA, HEARTBEAT, SM …)
}

// String is the summary line printed after the frames.
func (s DecodeSummary) String() string {
	var types []string
	for k, n := range s.Types {
		types = append(types, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(types)
	out := fmt.Sprintf("%d packets, %d UDP datagrams, %d frames", s.Packets, s.Datagrams, s.Frames)
	if len(types) > 0 {
		out += " (" + strings.Join(types, ", ") + ")"
	}
	out += fmt.Sprintf(", %d malformed", s.Malformed)
	if s.NotUDP > 0 {
		out += fmt.Sprintf(", %d not UDP", s.NotUDP)
	}
	if s.Filtered > 0 {
		out += fmt.Sprintf(", %d on other ports", s.Filtered)
	}
	if s.Fragments > 0 {
		out += fmt.Sprintf(", %d incomplete IP datagrams", s.Fragments)
	}
	return out
}

// ErrNotCapture is wrapped when the input is not a pcap or pcapng file.
var ErrNotCapture = pcap.ErrNotCapture

// Decode reads a capture (pcap or pcapng, optionally gzipped) and writes
// one line per Aeron frame:
//
//	time TYPE flags=… session=… stream=… term-id=… term-offset=… frame-length=… [type fields] packet=N offset=M src>dst
//
// Fields a frame type does not have print as "-". A frame that cannot be
// decoded prints as a MALFORMED line with its packet and offset and the
// reason; so does a packet whose IP or UDP header is broken. The summary
// follows as a final line starting with "#". An error is returned only when
// the file itself cannot be read further.
func Decode(w io.Writer, r io.Reader, opts DecodeOptions) (DecodeSummary, error) {
	sum := DecodeSummary{Types: map[string]int{}}
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return sum, fmt.Errorf("gzip: %w", err)
		}
		defer zr.Close()
		br = bufio.NewReader(zr)
	}
	pr, err := pcap.NewReader(br)
	if err != nil {
		return sum, err
	}
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	nanos := pr.NanosecondTimestamps()
	var dec pcap.Decoder
	line := make([]byte, 0, 256)
	for {
		p, err := pr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			sum.Fragments = dec.Pending()
			fmt.Fprintf(bw, "# %s\n", sum)
			return sum, err
		}
		sum.Packets++
		ts := formatTime(p.Time, nanos)
		dg, kind, err := dec.Datagram(&p)
		switch {
		case err != nil:
			sum.Malformed++
			fmt.Fprintf(bw, "%s MALFORMED packet=%d error=%q\n", ts, p.Number, err.Error())
			continue
		case kind == pcap.KindOther:
			sum.NotUDP++
			continue
		case kind == pcap.KindFragment:
			continue
		}
		if opts.Port != 0 && dg.Src.Port() != opts.Port && dg.Dst.Port() != opts.Port {
			sum.Filtered++
			continue
		}
		sum.Datagrams++
		addrs := addrString(dg.Src) + ">" + addrString(dg.Dst)
		if len(dg.Payload) == 0 {
			sum.Malformed++
			fmt.Fprintf(bw, "%s MALFORMED packet=%d offset=0 %s error=%q\n", ts, p.Number, addrs, "empty UDP datagram")
			continue
		}
		for off := 0; off < len(dg.Payload); {
			f, err := protocol.NextFrame(dg.Payload, off)
			if err != nil {
				sum.Malformed++
				fmt.Fprintf(bw, "%s MALFORMED packet=%d offset=%d %s error=%q\n", ts, p.Number, off, addrs, err.Error())
				break
			}
			line = line[:0]
			line = append(line, ts...)
			line = append(line, ' ')
			var label string
			line, label, err = appendFrame(line, f)
			if err != nil {
				sum.Malformed++
				fmt.Fprintf(bw, "%s MALFORMED packet=%d offset=%d %s error=%q\n", ts, p.Number, off, addrs, err.Error())
				break
			}
			sum.Frames++
			sum.Types[label]++
			line = fmt.Appendf(line, " packet=%d offset=%d %s\n", p.Number, off, addrs)
			bw.Write(line)
			off = f.Next
		}
	}
	sum.Fragments = dec.Pending()
	fmt.Fprintf(bw, "# %s\n", sum)
	return sum, nil
}

func addrString(a netip.AddrPort) string { return a.String() }

func formatTime(t time.Time, nanos bool) string {
	if nanos {
		return t.UTC().Format("2006-01-02T15:04:05.000000000Z")
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000Z")
}

func appendFlags(b []byte, t protocol.FrameType, flags uint8) []byte {
	b = fmt.Appendf(b, "flags=0x%02x", flags)
	if n := protocol.FlagNames(t, flags); n != "" {
		b = append(b, '(')
		b = append(b, n...)
		b = append(b, ')')
	}
	return b
}

type common struct {
	label      string
	flags      uint8
	typ        protocol.FrameType
	session    string
	stream     string
	termID     string
	termOffset string
	length     int32
}

func (c common) appendTo(b []byte) []byte {
	b = append(b, c.label...)
	b = append(b, ' ')
	b = appendFlags(b, c.typ, c.flags)
	return fmt.Appendf(b, " session=%s stream=%s term-id=%s term-offset=%s frame-length=%d",
		c.session, c.stream, c.termID, c.termOffset, c.length)
}

func i32(v int32) string { return strconv.FormatInt(int64(v), 10) }

// appendFrame formats one frame and returns the label it was counted under.
func appendFrame(b []byte, f protocol.Frame) ([]byte, string, error) {
	h := f.Header
	c := common{label: h.Type.String(), flags: h.Flags, typ: h.Type, session: "-", stream: "-", termID: "-", termOffset: "-", length: h.FrameLength}
	switch h.Type {
	case protocol.TypeData, protocol.TypePad:
		var d protocol.DataHeader
		payload, err := d.DecodeFrame(f.Bytes)
		if err != nil {
			return b, "", err
		}
		c.session, c.stream, c.termID, c.termOffset = i32(d.SessionID), i32(d.StreamID), i32(d.TermID), i32(d.TermOffset)
		if d.IsHeartbeat() {
			c.label = "HEARTBEAT"
		}
		b = c.appendTo(b)
		switch {
		case d.Type == protocol.TypeData && !d.IsHeartbeat():
			b = fmt.Appendf(b, " payload=%d", len(payload))
		case d.Type == protocol.TypePad && len(f.Bytes) < int(d.FrameLength):
			b = fmt.Appendf(b, " wire-length=%d", len(f.Bytes))
		}
		if d.ReservedValue != 0 {
			b = fmt.Appendf(b, " reserved-value=%d", d.ReservedValue)
		}
	case protocol.TypeSetup:
		var s protocol.Setup
		if err := s.Decode(f.Bytes); err != nil {
			return b, "", err
		}
		c.session, c.stream, c.termID, c.termOffset = i32(s.SessionID), i32(s.StreamID), i32(s.ActiveTermID), i32(s.TermOffset)
		b = c.appendTo(b)
		b = fmt.Appendf(b, " initial-term-id=%d term-length=%d mtu=%d ttl=%d", s.InitialTermID, s.TermLength, s.MTU, s.TTL)
	case protocol.TypeStatusMessage:
		var m protocol.StatusMessage
		if err := m.Decode(f.Bytes); err != nil {
			return b, "", err
		}
		c.session, c.stream, c.termID, c.termOffset = i32(m.SessionID), i32(m.StreamID), i32(m.ConsumptionTermID), i32(m.ConsumptionTermOffset)
		b = c.appendTo(b)
		b = fmt.Appendf(b, " window=%d receiver-id=%d", m.ReceiverWindow, m.ReceiverID)
		if m.HasGroupTag {
			b = fmt.Appendf(b, " group-tag=%d", m.GroupTag)
		}
	case protocol.TypeNak:
		var k protocol.Nak
		if err := k.Decode(f.Bytes); err != nil {
			return b, "", err
		}
		c.session, c.stream, c.termID, c.termOffset = i32(k.SessionID), i32(k.StreamID), i32(k.TermID), i32(k.TermOffset)
		b = c.appendTo(b)
		b = fmt.Appendf(b, " nak-length=%d", k.Length)
	case protocol.TypeRTTM:
		var r protocol.RTTMeasurement
		if err := r.Decode(f.Bytes); err != nil {
			return b, "", err
		}
		c.session, c.stream = i32(r.SessionID), i32(r.StreamID)
		b = c.appendTo(b)
		b = fmt.Appendf(b, " echo-timestamp=%d reception-delta=%d receiver-id=%d", r.EchoTimestamp, r.ReceptionDelta, r.ReceiverID)
	case protocol.TypeResponseSetup:
		var r protocol.ResponseSetup
		if err := r.Decode(f.Bytes); err != nil {
			return b, "", err
		}
		c.session, c.stream = i32(r.SessionID), i32(r.StreamID)
		b = c.appendTo(b)
		b = fmt.Appendf(b, " response-session-id=%d", r.ResponseSessionID)
	case protocol.TypeError:
		var e protocol.ErrorFrame
		if err := e.Decode(f.Bytes); err != nil {
			return b, "", err
		}
		c.session, c.stream = i32(e.SessionID), i32(e.StreamID)
		b = c.appendTo(b)
		b = fmt.Appendf(b, " receiver-id=%d", e.ReceiverID)
		if e.Flags&protocol.ErrorFlagGroupTag != 0 {
			b = fmt.Appendf(b, " group-tag=%d", e.GroupTag)
		}
		b = fmt.Appendf(b, " error-code=%d message=%q", e.ErrorCode, e.Message)
	case protocol.TypeResolution:
		var r protocol.Resolution
		if err := r.Decode(f.Bytes); err != nil {
			return b, "", err
		}
		b = c.appendTo(b)
		var entries []string
		for next := protocol.FrameHeaderLength; next < len(f.Bytes); {
			e, n, err := protocol.NextResolutionEntry(f.Bytes, next)
			if err != nil {
				return b, "", err
			}
			ip, _ := netip.AddrFromSlice(e.Address)
			s := fmt.Sprintf("%q@%s age=%dms", e.Name, netip.AddrPortFrom(ip, e.UDPPort), e.AgeInMs)
			if e.Flags&protocol.ResolutionFlagSelf != 0 {
				s += " self"
			}
			entries = append(entries, s)
			next = n
		}
		b = fmt.Appendf(b, " entries=%d", len(entries))
		if len(entries) > 0 {
			b = fmt.Appendf(b, " [%s]", strings.Join(entries, ", "))
		}
	default:
		b = c.appendTo(b)
		what := "type not decoded"
		if h.Type == protocol.TypeATSData || h.Type == protocol.TypeATSSetup || h.Type == protocol.TypeATSSM {
			what = "ATS (Aeron Transport Security) is not decoded"
		}
		b = fmt.Appendf(b, " note=%q", what)
	}
	return b, c.label, nil
}

// IsNotCapture reports whether err says the input was not a capture.
func IsNotCapture(err error) bool { return errors.Is(err, pcap.ErrNotCapture) }
