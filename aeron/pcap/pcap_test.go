package pcap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/ibgo/ibgo/aeron/internal/testvec"
	"github.com/stretchr/testify/require"
)

type rec struct {
	t    time.Time
	link LinkType
	data []byte
	orig int
}

func readAll(t *testing.T, b []byte) (*Reader, []rec) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(b))
	require.NoError(t, err)
	var out []rec
	for {
		p, err := r.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		require.Equal(t, len(out)+1, p.Number)
		out = append(out, rec{p.Time, p.LinkType, append([]byte(nil), p.Data...), p.OrigLen})
	}
	return r, out
}

func TestVectorsClassic(t *testing.T) {
	for _, tc := range []struct {
		name    string
		packets int
	}{
		{testvec.LossCubicPcap, 1843},
		{testvec.ResponseChannelPcap, 297},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, recs := readAll(t, testvec.MustBytes(tc.name))
			require.Equal(t, FormatClassic, r.Format())
			require.Equal(t, LinkTypeEthernet, r.LinkType())
			require.False(t, r.NanosecondTimestamps())
			require.Len(t, recs, tc.packets)
			var d Decoder
			for i, rc := range recs {
				p := Packet{Number: i + 1, LinkType: rc.link, Data: rc.data}
				dg, kind, err := d.Datagram(&p)
				require.NoError(t, err, "packet %d", i+1)
				require.Equal(t, KindUDP, kind)
				require.True(t, dg.Src.Addr().IsLoopback())
				require.True(t, dg.Dst.Addr().IsLoopback())
				require.GreaterOrEqual(t, len(dg.Payload), 20)
				require.Equal(t, rc.orig, len(rc.data))
			}
			if tc.name == testvec.LossCubicPcap {
				// First datagram: the 40-byte SETUP to port 20121.
				p := Packet{Number: 1, LinkType: recs[0].link, Data: recs[0].data}
				dg, _, _ := d.Datagram(&p)
				require.Equal(t, uint16(20121), dg.Dst.Port())
				require.Len(t, dg.Payload, 40)
				require.Equal(t, byte(5), dg.Payload[6])
				require.Equal(t, time.Unix(0x6b1012a5, 874646000).UTC(), recs[0].t)
			}
		})
	}
}

// writeNG re-encodes records as pcapng with the given byte order and
// timestamp resolution byte (if_tsresol), with an extra non-packet block.
func writeNG(order binary.ByteOrder, tsresol byte, recs []rec) []byte {
	var out bytes.Buffer
	block := func(typ uint32, body []byte) {
		for len(body)%4 != 0 {
			body = append(body, 0)
		}
		n := uint32(12 + len(body))
		binary.Write(&out, order, typ)
		binary.Write(&out, order, n)
		out.Write(body)
		binary.Write(&out, order, n)
	}
	var shb bytes.Buffer
	binary.Write(&shb, order, uint32(0x1A2B3C4D))
	binary.Write(&shb, order, uint16(1))
	binary.Write(&shb, order, uint16(0))
	binary.Write(&shb, order, int64(-1))
	block(blockSectionHeader, shb.Bytes())
	var idb bytes.Buffer
	binary.Write(&idb, order, uint16(LinkTypeEthernet))
	binary.Write(&idb, order, uint16(0))
	binary.Write(&idb, order, uint32(65535))
	binary.Write(&idb, order, uint16(optIfTsresol))
	binary.Write(&idb, order, uint16(1))
	idb.Write([]byte{tsresol, 0, 0, 0})
	binary.Write(&idb, order, uint32(0)) // end of options
	block(blockInterface, idb.Bytes())
	block(0x00000005, []byte{1, 2, 3, 4}) // interface statistics: skipped
	for _, r := range recs {
		var units uint64
		switch tsresol {
		case 6:
			units = uint64(r.t.UnixMicro())
		case 9:
			units = uint64(r.t.UnixNano())
		case 0x80 | 20:
			units = uint64(r.t.Unix())<<20 | uint64(r.t.Nanosecond())*(1<<20)/1e9
		}
		var epb bytes.Buffer
		binary.Write(&epb, order, uint32(0))
		binary.Write(&epb, order, uint32(units>>32))
		binary.Write(&epb, order, uint32(units))
		binary.Write(&epb, order, uint32(len(r.data)))
		binary.Write(&epb, order, uint32(r.orig))
		epb.Write(r.data)
		block(blockEnhancedPacket, epb.Bytes())
	}
	return out.Bytes()
}

func TestPcapNG(t *testing.T) {
	_, recs := readAll(t, testvec.MustBytes(testvec.ResponseChannelPcap))
	for _, tc := range []struct {
		name    string
		order   binary.ByteOrder
		tsresol byte
		nanos   bool
	}{
		{"le-micro", binary.LittleEndian, 6, false},
		{"be-nano", binary.BigEndian, 9, true},
		{"le-base2", binary.LittleEndian, 0x80 | 20, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ng := writeNG(tc.order, tc.tsresol, recs)
			r, got := readAll(t, ng)
			require.Equal(t, FormatNG, r.Format())
			require.Equal(t, tc.nanos, r.NanosecondTimestamps())
			require.Equal(t, LinkTypeEthernet, r.LinkType())
			require.Len(t, got, len(recs))
			for i := range recs {
				require.Equal(t, recs[i].data, got[i].data)
				require.WithinDuration(t, recs[i].t, got[i].t, time.Microsecond, "packet %d", i+1)
			}
		})
	}
	t.Run("two-sections", func(t *testing.T) {
		ng := append(writeNG(binary.LittleEndian, 6, recs[:3]), writeNG(binary.BigEndian, 9, recs[3:5])...)
		_, got := readAll(t, ng)
		require.Len(t, got, 5)
		require.Equal(t, recs[4].data, got[4].data)
	})
}

func classic(order binary.ByteOrder, magic uint32, link LinkType, pkts ...[]byte) []byte {
	var out bytes.Buffer
	binary.Write(&out, order, magic)
	binary.Write(&out, order, uint16(2))
	binary.Write(&out, order, uint16(4))
	binary.Write(&out, order, int32(0))
	binary.Write(&out, order, uint32(0))
	binary.Write(&out, order, uint32(262144))
	binary.Write(&out, order, uint32(link))
	for i, p := range pkts {
		binary.Write(&out, order, uint32(1000+i))
		binary.Write(&out, order, uint32(999))
		binary.Write(&out, order, uint32(len(p)))
		binary.Write(&out, order, uint32(len(p)))
		out.Write(p)
	}
	return out.Bytes()
}

func TestClassicByteOrderAndNanos(t *testing.T) {
	pkt := ipv4UDP(t, [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}, 1111, 2222, []byte("payload"), 0, false, 7)
	for _, tc := range []struct {
		order binary.ByteOrder
		magic uint32
		ns    int
	}{
		{binary.LittleEndian, 0xA1B2C3D4, 999000},
		{binary.BigEndian, 0xA1B2C3D4, 999000},
		{binary.LittleEndian, 0xA1B23C4D, 999},
		{binary.BigEndian, 0xA1B23C4D, 999},
	} {
		r, recs := readAll(t, classic(tc.order, tc.magic, LinkTypeRaw, pkt))
		require.Equal(t, tc.magic == 0xA1B23C4D, r.NanosecondTimestamps())
		require.Len(t, recs, 1)
		require.Equal(t, time.Unix(1000, int64(tc.ns)).UTC(), recs[0].t)
		var d Decoder
		dg, kind, err := d.Datagram(&Packet{LinkType: recs[0].link, Data: recs[0].data})
		require.NoError(t, err)
		require.Equal(t, KindUDP, kind)
		require.Equal(t, netip.MustParseAddrPort("10.0.0.1:1111"), dg.Src)
		require.Equal(t, netip.MustParseAddrPort("10.0.0.2:2222"), dg.Dst)
		require.Equal(t, []byte("payload"), dg.Payload)
	}
}

// ipv4UDP builds an IPv4 packet carrying (a fragment of) a UDP datagram.
func ipv4UDP(t *testing.T, src, dst [4]byte, sport, dport uint16, payload []byte, fragOff int, more bool, id uint16) []byte {
	t.Helper()
	u := make([]byte, 8+len(payload))
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(len(u)))
	copy(u[8:], payload)
	return ipv4Raw(src, dst, u, fragOff, more, id)
}

func ipv4Raw(src, dst [4]byte, body []byte, fragOff int, more bool, id uint16) []byte {
	h := make([]byte, 20, 20+len(body))
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:], uint16(20+len(body)))
	binary.BigEndian.PutUint16(h[4:], id)
	fo := uint16(fragOff / 8)
	if more {
		fo |= 0x2000
	}
	binary.BigEndian.PutUint16(h[6:], fo)
	h[8] = 64
	h[9] = protoUDP
	copy(h[12:], src[:])
	copy(h[16:], dst[:])
	return append(h, body...)
}

func ipv6UDP(src, dst netip.Addr, sport, dport uint16, payload []byte, ext bool) []byte {
	u := make([]byte, 8+len(payload))
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(len(u)))
	copy(u[8:], payload)
	next := byte(protoUDP)
	if ext {
		u = append([]byte{protoUDP, 0, 1, 4, 0, 0, 0, 0}, u...) // destination options, 8 bytes
		next = 60
	}
	h := make([]byte, 40)
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], uint16(len(u)))
	h[6] = next
	h[7] = 64
	s, d := src.As16(), dst.As16()
	copy(h[8:], s[:])
	copy(h[24:], d[:])
	return append(h, u...)
}

func ether(etherType uint16, vlans int, ip []byte) []byte {
	b := make([]byte, 12)
	for i := 0; i < vlans; i++ {
		b = binary.BigEndian.AppendUint16(b, etherTypeVLAN)
		b = binary.BigEndian.AppendUint16(b, uint16(100+i))
	}
	b = binary.BigEndian.AppendUint16(b, etherType)
	b = append(b, ip...)
	return append(b, make([]byte, 6)...) // Ethernet padding must be dropped
}

func TestLinkLayers(t *testing.T) {
	v4 := ipv4UDP(t, [4]byte{127, 0, 0, 1}, [4]byte{127, 0, 0, 1}, 40000, 20121, []byte{1, 2, 3}, 0, false, 1)
	src6, dst6 := netip.MustParseAddr("fe80::1"), netip.MustParseAddr("fe80::2")
	v6 := ipv6UDP(src6, dst6, 5, 6, []byte{9, 9}, false)
	v6ext := ipv6UDP(src6, dst6, 5, 6, []byte{9, 9}, true)
	sll := append(make([]byte, 14), 0x08, 0x00)
	sll2 := append([]byte{0x86, 0xDD}, make([]byte, 18)...)
	null := []byte{2, 0, 0, 0}
	for _, tc := range []struct {
		name    string
		link    LinkType
		data    []byte
		payload []byte
		port    uint16
	}{
		{"ether", LinkTypeEthernet, ether(etherTypeIPv4, 0, v4), []byte{1, 2, 3}, 20121},
		{"ether-qinq", LinkTypeEthernet, ether(etherTypeIPv4, 2, v4), []byte{1, 2, 3}, 20121},
		{"ether-v6", LinkTypeEthernet, ether(etherTypeIPv6, 0, v6), []byte{9, 9}, 6},
		{"raw-v6-ext", LinkTypeRaw, v6ext, []byte{9, 9}, 6},
		{"ipv4", LinkTypeIPv4, v4, []byte{1, 2, 3}, 20121},
		{"sll", LinkTypeLinuxSLL, append(sll, v4...), []byte{1, 2, 3}, 20121},
		{"sll2", LinkTypeLinuxSLL2, append(sll2, v6...), []byte{9, 9}, 6},
		{"null", LinkTypeNull, append(null, v4...), []byte{1, 2, 3}, 20121},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d Decoder
			dg, kind, err := d.Datagram(&Packet{Number: 1, LinkType: tc.link, Data: tc.data})
			require.NoError(t, err)
			require.Equal(t, KindUDP, kind)
			require.Equal(t, tc.payload, dg.Payload)
			require.Equal(t, tc.port, dg.Dst.Port())
		})
	}
	var d Decoder
	arp := append(make([]byte, 12), 0x08, 0x06, 0, 1)
	_, kind, err := d.Datagram(&Packet{LinkType: LinkTypeEthernet, Data: arp})
	require.NoError(t, err)
	require.Equal(t, KindOther, kind)
	tcp := ipv4Raw([4]byte{1, 1, 1, 1}, [4]byte{2, 2, 2, 2}, make([]byte, 20), 0, false, 1)
	tcp[9] = 6
	_, kind, err = d.Datagram(&Packet{LinkType: LinkTypeRaw, Data: tcp})
	require.NoError(t, err)
	require.Equal(t, KindOther, kind)
}

func TestFragmentReassembly(t *testing.T) {
	payload := make([]byte, 3000)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	whole := ipv4UDP(t, [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}, 1, 2, payload, 0, false, 42)
	udpBytes := whole[20:] // 3008 bytes of UDP header + payload
	src, dst := [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}
	f1 := ipv4Raw(src, dst, udpBytes[:1480], 0, true, 42)
	f2 := ipv4Raw(src, dst, udpBytes[1480:2960], 1480, true, 42)
	f3 := ipv4Raw(src, dst, udpBytes[2960:], 2960, false, 42)
	var d Decoder
	// Out of order, with an unrelated datagram in between.
	for i, f := range [][]byte{f3, f1} {
		_, kind, err := d.Datagram(&Packet{Number: i + 1, LinkType: LinkTypeRaw, Data: f})
		require.NoError(t, err)
		require.Equal(t, KindFragment, kind)
	}
	other := ipv4UDP(t, src, dst, 1, 2, []byte("x"), 0, false, 43)
	dg, kind, err := d.Datagram(&Packet{LinkType: LinkTypeRaw, Data: other})
	require.NoError(t, err)
	require.Equal(t, KindUDP, kind)
	require.Equal(t, []byte("x"), dg.Payload)
	require.Equal(t, 1, d.Pending())
	dg, kind, err = d.Datagram(&Packet{Number: 3, LinkType: LinkTypeRaw, Data: f2})
	require.NoError(t, err)
	require.Equal(t, KindUDP, kind)
	require.Equal(t, 3, dg.Fragments)
	require.Equal(t, payload, dg.Payload)
	require.Zero(t, d.Pending())

	// A fragment that is not the last must carry a multiple of 8 bytes.
	bad := ipv4Raw(src, dst, udpBytes[:13], 0, true, 44)
	_, _, err = d.Datagram(&Packet{Number: 9, LinkType: LinkTypeRaw, Data: bad})
	require.ErrorContains(t, err, "multiple of 8")

	// IPv6 fragments.
	s6, d6 := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
	w6 := ipv6UDP(s6, d6, 7, 8, payload, false)
	u6 := w6[40:]
	frag6 := func(off int, data []byte, more bool) []byte {
		fh := []byte{protoUDP, 0, 0, 0, 0, 0, 0, 99}
		fo := uint16(off)
		if more {
			fo |= 1
		}
		binary.BigEndian.PutUint16(fh[2:], fo)
		body := append(fh, data...)
		h := append([]byte(nil), w6[:40]...)
		binary.BigEndian.PutUint16(h[4:], uint16(len(body)))
		h[6] = 44
		return append(h, body...)
	}
	_, kind, err = d.Datagram(&Packet{LinkType: LinkTypeRaw, Data: frag6(0, u6[:1504], true)})
	require.NoError(t, err)
	require.Equal(t, KindFragment, kind)
	dg, kind, err = d.Datagram(&Packet{LinkType: LinkTypeRaw, Data: frag6(1504, u6[1504:], false)})
	require.NoError(t, err)
	require.Equal(t, KindUDP, kind)
	require.Equal(t, payload, dg.Payload)
	require.Equal(t, uint16(8), dg.Dst.Port())
}

func TestPendingFragmentsBounded(t *testing.T) {
	var d Decoder
	src, dst := [4]byte{1, 2, 3, 4}, [4]byte{5, 6, 7, 8}
	for i := 0; i < maxPendingFragments+50; i++ {
		f := ipv4Raw(src, dst, make([]byte, 16), 0, true, uint16(i))
		_, kind, err := d.Datagram(&Packet{LinkType: LinkTypeRaw, Data: f})
		require.NoError(t, err)
		require.Equal(t, KindFragment, kind)
	}
	require.Equal(t, maxPendingFragments, d.Pending())
}

func TestMalformed(t *testing.T) {
	good := classic(binary.LittleEndian, 0xA1B2C3D4, LinkTypeEthernet, []byte{1, 2, 3})
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "reading the file header: unexpected EOF"},
		{"short-header", good[:10], "reading the 24-byte pcap file header"},
		{"bad-magic", append([]byte("GIF89a"), make([]byte, 30)...), "magic 47494638 is neither pcap"},
		{"bad-version", func() []byte { b := append([]byte(nil), good...); b[4] = 3; return b }(), "pcap version 3.4"},
		{"ng-bad-bom", append([]byte{0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 1, 2, 3, 4}, make([]byte, 16)...), "byte-order magic 01020304"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewReader(bytes.NewReader(tc.data))
			require.ErrorContains(t, err, tc.want)
			require.ErrorIs(t, err, ErrNotCapture)
		})
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"record-cut", good[:24+10], "packet 1 at byte 24: record header cut short"},
		{"data-cut", good[:len(good)-1], "packet 1 at byte 24: packet data cut short (record says 3 bytes)"},
		{"huge", func() []byte {
			b := append([]byte(nil), good...)
			binary.LittleEndian.PutUint32(b[24+8:], MaxRecordLength+1)
			return b
		}(), "captured length 16777217 exceeds 16777216"},
		{"usec", func() []byte {
			b := append([]byte(nil), good...)
			binary.LittleEndian.PutUint32(b[24+4:], 1e6)
			return b
		}(), "microseconds field 1000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewReader(bytes.NewReader(tc.data))
			require.NoError(t, err)
			_, err = r.Next()
			require.ErrorContains(t, err, tc.want)
			var pe *Error
			require.True(t, errors.As(err, &pe))
		})
	}

	var d Decoder
	v4 := ipv4UDP(t, [4]byte{1, 1, 1, 1}, [4]byte{2, 2, 2, 2}, 1, 2, []byte("abcd"), 0, false, 1)
	for _, tc := range []struct {
		name string
		link LinkType
		data []byte
		want string
	}{
		{"short-ether", LinkTypeEthernet, []byte{1, 2}, "Ethernet header needs 14 bytes"},
		{"snaplen", LinkTypeRaw, v4[:len(v4)-2], "IPv4 total length 32 exceeds the 30 bytes captured"},
		{"ihl", LinkTypeRaw, func() []byte { b := append([]byte(nil), v4...); b[0] = 0x43; return b }(), "IPv4 header length 12"},
		{"udp-len", LinkTypeRaw, func() []byte { b := append([]byte(nil), v4...); b[20+5] = 200; return b }(), "UDP length 200 exceeds the 12 bytes"},
		{"udp-short", LinkTypeRaw, func() []byte { b := append([]byte(nil), v4...); b[20+5] = 3; return b }(), "UDP length 3 is less than its 8-byte header"},
		{"mismatch", LinkTypeEthernet, ether(etherTypeIPv6, 0, v4), "link layer says IPv6, IP header says version 4"},
		{"link", 999, v4, "link type 999 is not supported"},
		{"v6-short", LinkTypeRaw, []byte{0x60, 0, 0}, "IPv6 header needs 40 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := d.Datagram(&Packet{Number: 5, Offset: 100, LinkType: tc.link, Data: tc.data})
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "pcap: packet 5 at byte 100: ")
		})
	}
}

// FuzzReader feeds arbitrary bytes to the capture reader and the UDP
// decoder: whatever the input, they return packets or errors, never panic,
// and every payload lies within the record it came from.
func FuzzReader(f *testing.F) {
	for _, name := range []string{testvec.ResponseChannelPcap, testvec.LossCubicPcap} {
		b := testvec.MustBytes(name)
		f.Add(b[:min(len(b), 4096)])
	}
	_, recs := readAllNoT(testvec.MustBytes(testvec.ResponseChannelPcap))
	f.Add(writeNG(binary.LittleEndian, 9, recs[:4]))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data))
		if err != nil {
			return
		}
		var d Decoder
		for i := 0; i < 10000; i++ {
			p, err := r.Next()
			if err != nil {
				return
			}
			if len(p.Data) > len(data) {
				t.Fatalf("packet of %d bytes from %d bytes of input", len(p.Data), len(data))
			}
			dg, kind, err := d.Datagram(&p)
			if err == nil && kind == KindUDP && dg.Fragments == 0 && len(dg.Payload) > len(p.Data) {
				t.Fatalf("payload of %d bytes from a %d-byte packet", len(dg.Payload), len(p.Data))
			}
		}
	})
}

func readAllNoT(b []byte) (*Reader, []rec) {
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		panic(err)
	}
	var out []rec
	for {
		p, err := r.Next()
		if err != nil {
			return r, out
		}
		out = append(out, rec{p.Time, p.LinkType, append([]byte(nil), p.Data...), p.OrigLen})
	}
}
