package ib

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/uri"
)

func TestRCRingSize(t *testing.T) {
	require.Equal(t, 256, rcRingSize(128<<10, 1024, 0, 0))      // 2 × 128 frames
	require.Equal(t, minRing, rcRingSize(128<<10, 16384, 0, 0)) // large mtu: the floor
	require.Equal(t, 100, rcRingSize(128<<10, 1024, 100, 0))    // the device's SRQ depth
	// the shared CQ holds receive completions only: the ring fills it,
	// whatever the number of connections (each has its own send CQ)
	require.Equal(t, 100, rcRingSize(128<<10, 1024, 0, 100))
}

func TestRCMTU(t *testing.T) {
	p := driver.TransportParams{MTU: 1408}
	u, err := uri.Parse("aeron:ib?endpoint=10.0.0.1:20121|ib-qp=rc|mtu=16384")
	require.NoError(t, err)
	require.Equal(t, 16384, rcMTU(u, p)) // a subscription takes its channel's mtu
	u, err = uri.Parse("aeron:ib?endpoint=10.0.0.1:20121|ib-qp=rc")
	require.NoError(t, err)
	require.Equal(t, 1408, rcMTU(u, p)) // else the driver's
}

func TestRCConnectData(t *testing.T) {
	n, ok := rcParseData(rcConnectData(16384, 0))
	require.True(t, ok)
	require.Equal(t, 16384, n)
	require.Zero(t, rcParseFlags(rcConnectData(16384, 0)))
	// the kernel pads private data to 56 bytes
	b := make([]byte, 56)
	copy(b, rcConnectData(4096, rcConnWrite))
	n, ok = rcParseData(b)
	require.True(t, ok)
	require.Equal(t, 4096, n)
	require.Equal(t, uint32(rcConnWrite), rcParseFlags(b))
	// a peer of before the flags sends 8 bytes (padded with zeros): none
	b = make([]byte, 56)
	copy(b, rcConnectData(4096, rcConnWrite)[:8])
	require.Zero(t, rcParseFlags(b))
	_, ok = rcParseData([]byte("AIBX\x00\x10\x00\x00"))
	require.False(t, ok)
	_, ok = rcParseData(nil)
	require.False(t, ok)
}

func TestRCRules(t *testing.T) {
	// aeron/uri refuses multicast with rc before a medium sees it ...
	_, err := uri.Parse("aeron:ib?endpoint=224.0.1.1:40456|ib-qp=rc")
	require.ErrorContains(t, err, "multicast needs ib-qp=ud")
	// ... and mtu above one fabric packet only with ud
	_, err = uri.Parse("aeron:ib?endpoint=10.0.0.1:1|mtu=16384")
	require.ErrorContains(t, err, "use ib-qp=rc for larger frames")
	_, err = uri.Parse("aeron:ib?endpoint=10.0.0.1:1|ib-qp=rc|mtu=16384")
	require.NoError(t, err)
	// the medium refuses multicast itself too, without touching a device
	u, err := uri.Parse("aeron:ib?endpoint=10.0.0.1:1|ib-qp=rc")
	require.NoError(t, err)
	_, err = New().Open(u, netip.MustParseAddrPort("224.0.1.1:40456"), netip.AddrPort{}, driver.TransportParams{MTU: 1408}, driver.AffinityReceiver)
	require.ErrorContains(t, err, "multicast needs ib-qp=ud")
}
