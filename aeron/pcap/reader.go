package pcap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"time"
)

// LinkType is the link-layer header type of a capture (LINKTYPE_* in the
// tcpdump registry).
type LinkType uint16

// Link types understood by Datagrams.
const (
	LinkTypeNull      LinkType = 0   // BSD loopback: 4-byte address family, host order
	LinkTypeEthernet  LinkType = 1   // Ethernet II, optionally VLAN tagged
	LinkTypeRaw       LinkType = 101 // raw IPv4 or IPv6
	LinkTypeLoop      LinkType = 108 // OpenBSD loopback: 4-byte family, network order
	LinkTypeLinuxSLL  LinkType = 113 // Linux cooked capture v1 (tcpdump -i any)
	LinkTypeIPv4      LinkType = 228
	LinkTypeIPv6      LinkType = 229
	LinkTypeLinuxSLL2 LinkType = 276 // Linux cooked capture v2
)

// Format is the container format of a capture file.
type Format int

// Capture formats.
const (
	FormatClassic Format = iota + 1 // libpcap: 24-byte file header, 16-byte record headers
	FormatNG                        // pcapng: blocks
)

func (f Format) String() string {
	switch f {
	case FormatClassic:
		return "pcap"
	case FormatNG:
		return "pcapng"
	}
	return "unknown"
}

// MaxRecordLength caps one captured packet (or pcapng block). Real captures
// stay below 256 KiB; a larger length means a corrupt file.
const MaxRecordLength = 16 << 20

// ErrNotCapture is wrapped by NewReader when the input is neither pcap nor pcapng.
var ErrNotCapture = errors.New("not a pcap or pcapng capture")

// Error describes a malformed capture: the packet number (1-based; 0 for the
// file header) and the byte offset of the record or block at fault.
type Error struct {
	Packet int
	Offset int64
	Reason string
	Err    error
}

func (e *Error) Error() string {
	s := "pcap: "
	if e.Packet > 0 {
		s += fmt.Sprintf("packet %d ", e.Packet)
	}
	s += fmt.Sprintf("at byte %d: %s", e.Offset, e.Reason)
	if e.Err != nil && e.Err != ErrNotCapture {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Packet is one captured packet.
type Packet struct {
	Number   int // 1-based
	Offset   int64
	Time     time.Time
	LinkType LinkType
	Data     []byte // captured bytes; valid until the next call to Next
	OrigLen  int    // length on the wire (Data may be shorter: snaplen)
}

type iface struct {
	link    LinkType
	snaplen uint32
	base2   bool  // if_tsresol high bit: 2^-n instead of 10^-n
	exp     uint8 // if_tsresol exponent
	offset  int64 // if_tsoffset, seconds
}

// Reader reads packets from a pcap or pcapng stream.
type Reader struct {
	r      *bufio.Reader
	format Format
	order  binary.ByteOrder
	off    int64
	n      int
	buf    []byte

	// classic
	link    LinkType
	snaplen uint32
	nanos   bool

	// pcapng
	ifaces []iface
}

// NewReader reads the file header (pcap) or first section header (pcapng).
func NewReader(r io.Reader) (*Reader, error) {
	rd := &Reader{r: bufio.NewReaderSize(r, 64<<10)}
	magic, err := rd.r.Peek(4)
	if err != nil {
		return nil, &Error{Reason: fmt.Sprintf("reading the file header: %v", noEOF(err)), Err: ErrNotCapture}
	}
	switch {
	case binary.LittleEndian.Uint32(magic) == 0x0A0D0D0A:
		rd.format = FormatNG
		if err := rd.readSectionHeader(); err != nil {
			return nil, err
		}
		return rd, nil
	default:
		if err := rd.readClassicHeader(); err != nil {
			return nil, err
		}
		return rd, nil
	}
}

// Format reports whether the file is classic pcap or pcapng.
func (r *Reader) Format() Format { return r.format }

// LinkType is the link type of a classic pcap file, or of the first
// interface of a pcapng section.
func (r *Reader) LinkType() LinkType {
	if r.format == FormatNG && len(r.ifaces) > 0 {
		return r.ifaces[0].link
	}
	return r.link
}

// NanosecondTimestamps reports whether the file stores nanoseconds (a
// classic pcap with magic a1b23c4d, or a pcapng interface with resolution
// finer than microseconds).
func (r *Reader) NanosecondTimestamps() bool {
	if r.format == FormatNG {
		for _, f := range r.ifaces {
			if (!f.base2 && f.exp > 6) || (f.base2 && f.exp > 20) {
				return true
			}
		}
		return false
	}
	return r.nanos
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// read returns the next n bytes in a buffer reused across calls. It grows
// the buffer as data arrives, so a corrupt length in a short file costs no
// more memory than the file holds.
func (r *Reader) read(n int) ([]byte, error) {
	const chunk = 1 << 20
	b := r.buf[:0]
	for len(b) < n {
		want := min(n-len(b), chunk)
		if cap(b)-len(b) < want {
			nb := make([]byte, len(b), len(b)+want)
			copy(nb, b)
			b = nb
		}
		m, err := io.ReadFull(r.r, b[len(b):len(b)+want])
		b = b[:len(b)+m]
		if err != nil {
			r.buf = b[:0]
			if len(b) > 0 && err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	r.buf = b[:0]
	r.off += int64(n)
	return b, nil
}

func (r *Reader) readClassicHeader() error {
	hdr := make([]byte, 24)
	if _, err := io.ReadFull(r.r, hdr); err != nil {
		return &Error{Reason: fmt.Sprintf("reading the 24-byte pcap file header: %v", noEOF(err)), Err: ErrNotCapture}
	}
	r.off = 24
	switch binary.LittleEndian.Uint32(hdr) {
	case 0xA1B2C3D4:
		r.order = binary.LittleEndian
	case 0xA1B23C4D:
		r.order, r.nanos = binary.LittleEndian, true
	case 0xD4C3B2A1:
		r.order = binary.BigEndian
	case 0x4D3CB2A1:
		r.order, r.nanos = binary.BigEndian, true
	default:
		return &Error{Reason: fmt.Sprintf("magic %08x is neither pcap (a1b2c3d4, a1b23c4d) nor pcapng (0a0d0d0a)", binary.BigEndian.Uint32(hdr)), Err: ErrNotCapture}
	}
	if major := r.order.Uint16(hdr[4:]); major != 2 {
		return &Error{Reason: fmt.Sprintf("pcap version %d.%d, want 2.x", major, r.order.Uint16(hdr[6:])), Err: ErrNotCapture}
	}
	r.snaplen = r.order.Uint32(hdr[16:])
	// The upper bits of the link-type field carry FCS information.
	r.link = LinkType(r.order.Uint32(hdr[20:]) & 0xffff)
	r.format = FormatClassic
	return nil
}

// Next returns the next packet, or io.EOF after the last one.
func (r *Reader) Next() (Packet, error) {
	if r.format == FormatNG {
		return r.nextNG()
	}
	return r.nextClassic()
}

func (r *Reader) nextClassic() (Packet, error) {
	start := r.off
	hdr, err := r.read(16)
	if err == io.EOF {
		return Packet{}, io.EOF
	}
	num := r.n + 1
	if err != nil {
		return Packet{}, &Error{Packet: num, Offset: start, Reason: "record header cut short", Err: noEOF(err)}
	}
	sec := r.order.Uint32(hdr[0:])
	frac := r.order.Uint32(hdr[4:])
	incl := r.order.Uint32(hdr[8:])
	orig := r.order.Uint32(hdr[12:])
	if incl > MaxRecordLength {
		return Packet{}, &Error{Packet: num, Offset: start, Reason: fmt.Sprintf("captured length %d exceeds %d", incl, MaxRecordLength)}
	}
	var ns int64
	if r.nanos {
		if frac >= 1e9 {
			return Packet{}, &Error{Packet: num, Offset: start, Reason: fmt.Sprintf("nanoseconds field %d is not below 1e9", frac)}
		}
		ns = int64(frac)
	} else {
		if frac >= 1e6 {
			return Packet{}, &Error{Packet: num, Offset: start, Reason: fmt.Sprintf("microseconds field %d is not below 1e6", frac)}
		}
		ns = int64(frac) * 1000
	}
	data, err := r.read(int(incl))
	if err != nil {
		return Packet{}, &Error{Packet: num, Offset: start, Reason: fmt.Sprintf("packet data cut short (record says %d bytes)", incl), Err: noEOF(err)}
	}
	r.n = num
	return Packet{Number: num, Offset: start, Time: time.Unix(int64(sec), ns).UTC(), LinkType: r.link, Data: data, OrigLen: int(orig)}, nil
}

// pcapng block types.
const (
	blockSectionHeader   = 0x0A0D0D0A
	blockInterface       = 0x00000001
	blockPacketObsolete  = 0x00000002
	blockSimplePacket    = 0x00000003
	blockEnhancedPacket  = 0x00000006
	byteOrderMagic       = 0x1A2B3C4D
	optEndOfOpt          = 0
	optIfTsresol         = 9
	optIfTsoffset        = 14
	minBlockLength       = 12
	sectionHeaderMinBody = 16
)

// readBlock reads one pcapng block and returns its type and body (without
// the type and the two length fields).
func (r *Reader) readBlock(num int) (uint32, []byte, int64, error) {
	start := r.off
	hdr, err := r.read(8)
	if err == io.EOF {
		return 0, nil, start, io.EOF
	}
	if err != nil {
		return 0, nil, start, &Error{Packet: num, Offset: start, Reason: "block header cut short", Err: noEOF(err)}
	}
	typ := r.order.Uint32(hdr[0:])
	if typ == blockSectionHeader {
		// A new section may switch byte order, so its length can only be
		// read after its byte-order magic: hand back the raw length field.
		return typ, append([]byte(nil), hdr[4:8]...), start, nil
	}
	total := r.order.Uint32(hdr[4:])
	if total < minBlockLength || total%4 != 0 || total > MaxRecordLength {
		return 0, nil, start, &Error{Packet: num, Offset: start, Reason: fmt.Sprintf("block type 0x%x has total length %d (must be a multiple of 4 in %d..%d)", typ, total, minBlockLength, MaxRecordLength)}
	}
	body, err := r.read(int(total) - 8)
	if err != nil {
		return 0, nil, start, &Error{Packet: num, Offset: start, Reason: fmt.Sprintf("block type 0x%x cut short (says %d bytes)", typ, total), Err: noEOF(err)}
	}
	if trailer := r.order.Uint32(body[len(body)-4:]); trailer != total {
		return 0, nil, start, &Error{Packet: num, Offset: start, Reason: fmt.Sprintf("block type 0x%x: trailing length %d differs from leading length %d", typ, trailer, total)}
	}
	return typ, body[:len(body)-4], start, nil
}

func (r *Reader) readSectionHeader() error {
	start := r.off
	hdr := make([]byte, 12)
	if _, err := io.ReadFull(r.r, hdr); err != nil {
		return &Error{Offset: start, Reason: fmt.Sprintf("pcapng section header cut short: %v", noEOF(err)), Err: ErrNotCapture}
	}
	r.off += 12
	return r.finishSectionHeader(start, hdr[4:8], hdr[8:12])
}

// finishSectionHeader validates a section header given its length and
// byte-order-magic fields and skips the rest of it.
func (r *Reader) finishSectionHeader(start int64, lenField, bomField []byte) error {
	switch binary.LittleEndian.Uint32(bomField) {
	case byteOrderMagic:
		r.order = binary.LittleEndian
	case 0x4D3C2B1A:
		r.order = binary.BigEndian
	default:
		return &Error{Offset: start, Reason: fmt.Sprintf("pcapng byte-order magic %08x is not 1a2b3c4d", binary.BigEndian.Uint32(bomField)), Err: ErrNotCapture}
	}
	total := r.order.Uint32(lenField)
	if total < 28 || total%4 != 0 || total > MaxRecordLength {
		return &Error{Offset: start, Reason: fmt.Sprintf("section header total length %d is invalid", total), Err: ErrNotCapture}
	}
	rest, err := r.read(int(total) - 12)
	if err != nil {
		return &Error{Offset: start, Reason: "pcapng section header cut short", Err: noEOF(err)}
	}
	if major := r.order.Uint16(rest[0:]); major != 1 {
		return &Error{Offset: start, Reason: fmt.Sprintf("pcapng version %d.%d, want 1.x", major, r.order.Uint16(rest[2:])), Err: ErrNotCapture}
	}
	if trailer := r.order.Uint32(rest[len(rest)-4:]); trailer != total {
		return &Error{Offset: start, Reason: fmt.Sprintf("section header trailing length %d differs from %d", trailer, total)}
	}
	r.format = FormatNG
	r.ifaces = r.ifaces[:0]
	return nil
}

func (r *Reader) nextNG() (Packet, error) {
	for {
		num := r.n + 1
		typ, body, start, err := r.readBlock(num)
		if err != nil {
			return Packet{}, err
		}
		switch typ {
		case blockSectionHeader:
			f, err := r.read(4) // byte-order magic
			if err != nil {
				return Packet{}, &Error{Packet: num, Offset: start, Reason: "section header cut short", Err: noEOF(err)}
			}
			bom := append([]byte(nil), f...)
			if err := r.finishSectionHeader(start, body, bom); err != nil {
				return Packet{}, err
			}
		case blockInterface:
			if err := r.addInterface(body, start); err != nil {
				return Packet{}, err
			}
		case blockEnhancedPacket:
			if len(body) < 20 {
				return Packet{}, &Error{Packet: num, Offset: start, Reason: fmt.Sprintf("enhanced packet block body of %d bytes, need 20", len(body))}
			}
			id := r.order.Uint32(body[0:])
			ts := uint64(r.order.Uint32(body[4:]))<<32 | uint64(r.order.Uint32(body[8:]))
			capLen := r.order.Uint32(body[12:])
			orig := r.order.Uint32(body[16:])
			return r.packet(num, start, id, ts, capLen, orig, body[20:])
		case blockPacketObsolete:
			if len(body) < 20 {
				return Packet{}, &Error{Packet: num, Offset: start, Reason: fmt.Sprintf("packet block body of %d bytes, need 20", len(body))}
			}
			id := uint32(r.order.Uint16(body[0:]))
			ts := uint64(r.order.Uint32(body[4:]))<<32 | uint64(r.order.Uint32(body[8:]))
			capLen := r.order.Uint32(body[12:])
			orig := r.order.Uint32(body[16:])
			return r.packet(num, start, id, ts, capLen, orig, body[20:])
		case blockSimplePacket:
			if len(body) < 4 {
				return Packet{}, &Error{Packet: num, Offset: start, Reason: "simple packet block without a length"}
			}
			if len(r.ifaces) == 0 {
				return Packet{}, &Error{Packet: num, Offset: start, Reason: "simple packet block before any interface description block"}
			}
			orig := r.order.Uint32(body[0:])
			capLen := min(orig, uint32(len(body)-4))
			if s := r.ifaces[0].snaplen; s != 0 {
				capLen = min(capLen, s)
			}
			r.n = num
			return Packet{Number: num, Offset: start, LinkType: r.ifaces[0].link, Data: body[4 : 4+capLen], OrigLen: int(orig)}, nil
		default:
			// Name resolution, statistics, custom blocks: not packets.
		}
	}
}

func (r *Reader) packet(num int, start int64, id uint32, ts uint64, capLen, orig uint32, data []byte) (Packet, error) {
	if int(id) >= len(r.ifaces) {
		return Packet{}, &Error{Packet: num, Offset: start, Reason: fmt.Sprintf("interface id %d, but only %d interfaces are described", id, len(r.ifaces))}
	}
	if int64(capLen) > int64(len(data)) {
		return Packet{}, &Error{Packet: num, Offset: start, Reason: fmt.Sprintf("captured length %d exceeds the %d bytes of the block", capLen, len(data))}
	}
	f := r.ifaces[id]
	r.n = num
	return Packet{Number: num, Offset: start, Time: f.time(ts), LinkType: f.link, Data: data[:capLen], OrigLen: int(orig)}, nil
}

func (r *Reader) addInterface(body []byte, start int64) error {
	if len(body) < 8 {
		return &Error{Offset: start, Reason: fmt.Sprintf("interface description block body of %d bytes, need 8", len(body))}
	}
	f := iface{link: LinkType(r.order.Uint16(body[0:])), snaplen: r.order.Uint32(body[4:]), exp: 6}
	opts := body[8:]
	for len(opts) >= 4 {
		code := r.order.Uint16(opts[0:])
		n := int(r.order.Uint16(opts[2:]))
		if code == optEndOfOpt {
			break
		}
		padded := (n + 3) &^ 3
		if 4+padded > len(opts) {
			return &Error{Offset: start, Reason: fmt.Sprintf("interface option %d of %d bytes overruns the block", code, n)}
		}
		v := opts[4 : 4+n]
		switch code {
		case optIfTsresol:
			if n == 1 {
				f.base2 = v[0]&0x80 != 0
				f.exp = v[0] & 0x7f
				if (!f.base2 && f.exp > 18) || (f.base2 && f.exp > 63) {
					return &Error{Offset: start, Reason: fmt.Sprintf("if_tsresol 0x%02x is out of range", v[0])}
				}
			}
		case optIfTsoffset:
			if n == 8 {
				f.offset = int64(r.order.Uint64(v))
			}
		}
		opts = opts[4+padded:]
	}
	r.ifaces = append(r.ifaces, f)
	return nil
}

var pow10 = [...]uint64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18}

// time converts a raw pcapng timestamp in the interface's resolution.
func (f iface) time(ts uint64) time.Time {
	var units uint64
	if f.base2 {
		units = 1 << f.exp
	} else {
		units = pow10[f.exp]
	}
	sec := ts / units
	rem := ts % units
	hi, lo := bits.Mul64(rem, 1e9)
	ns, _ := bits.Div64(hi, lo, units)
	return time.Unix(int64(sec)+f.offset, int64(ns)).UTC()
}
