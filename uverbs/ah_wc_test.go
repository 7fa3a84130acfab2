package uverbs

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

// roceV4GRH is the header area rxe writes for a RoCE v2 datagram from src to
// dst over IPv4: 20 zero bytes, then the IPv4 header with its checksum.
func roceV4GRH(src, dst [4]byte, tos, ttl byte) []byte {
	b := make([]byte, GRHLen)
	h := b[20:]
	h[0] = 0x45
	h[1] = tos
	binary.BigEndian.PutUint16(h[2:], 20+8+12+64)
	h[8] = ttl
	h[9] = 17
	copy(h[12:], src[:])
	copy(h[16:], dst[:])
	binary.BigEndian.PutUint16(h[10:], ipv4Checksum(h))
	return b
}

func TestParseGRHIPv4(t *testing.T) {
	b := roceV4GRH([4]byte{10, 0, 0, 2}, [4]byte{10, 0, 0, 1}, 0x20, 64)
	g, err := ParseGRH(b)
	require.NoError(t, err)
	require.Equal(t, 4, g.Version)
	require.Equal(t, "::ffff:10.0.0.2", g.SGID.String())
	require.Equal(t, "::ffff:10.0.0.1", g.DGID.String())
	require.EqualValues(t, 0x20, g.TrafficClass)
	require.EqualValues(t, 64, g.HopLimit)
	require.EqualValues(t, 17, g.NextHeader)

	// Without an IPv6 version nibble the IPv4 header is believed even with
	// a bad checksum, as libibverbs does.
	b[30] ^= 1
	g, err = ParseGRH(b)
	require.NoError(t, err)
	require.Equal(t, 4, g.Version)

	// Neither header: an error that errors.Is(ErrNotSupported).
	_, err = ParseGRH(make([]byte, GRHLen))
	require.ErrorIs(t, err, ErrNotSupported)
}

func TestParseGRHIPv6(t *testing.T) {
	b := make([]byte, GRHLen)
	binary.BigEndian.PutUint32(b, 6<<28|0x12<<20|0xabcde)
	b[6], b[7] = 17, 63
	src, _ := ParseGID("fe80::1")
	dst, _ := ParseGID("fe80::2")
	copy(b[8:], src[:])
	copy(b[24:], dst[:])
	g, err := ParseGRH(b)
	require.NoError(t, err)
	require.Equal(t, GRH{Version: 6, SGID: src, DGID: dst, TrafficClass: 0x12, FlowLabel: 0xabcde, HopLimit: 63, NextHeader: 17}, g)

	// Version nibble 6 and an IPv4-looking second half without a valid
	// checksum: IPv6 wins, as in libibverbs.
	b[20] = 0x45
	g, err = ParseGRH(b)
	require.NoError(t, err)
	require.Equal(t, 6, g.Version)

	_, err = ParseGRH(b[:39])
	require.ErrorContains(t, err, "39 bytes")
}

func FuzzParseGRH(f *testing.F) {
	f.Add(roceV4GRH([4]byte{10, 0, 0, 2}, [4]byte{10, 0, 0, 1}, 0, 64))
	f.Add(make([]byte, GRHLen))
	v6 := make([]byte, GRHLen)
	v6[0] = 0x60
	f.Add(v6)
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := ParseGRH(b)
		if err != nil {
			return
		}
		switch g.Version {
		case 4:
			// A parsed IPv4 header has a valid checksum unless the IPv6
			// nibble was absent (then libibverbs believes it anyway).
			if b[0]>>4 == 6 && ipv4Checksum(b[20:40]) != 0 {
				t.Fatalf("IPv4 chosen over IPv6 with a bad checksum: %x", b[:GRHLen])
			}
			if g.SGID[10] != 0xff || g.SGID[11] != 0xff {
				t.Fatalf("IPv4 source not mapped: %s", g.SGID)
			}
		case 6:
			if b[0]>>4 != 6 {
				t.Fatalf("IPv6 without the version nibble: %x", b[:GRHLen])
			}
		default:
			t.Fatalf("version %d", g.Version)
		}
	})
}
