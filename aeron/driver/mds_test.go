package driver

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMDSControlToLiveConnections: an image of a multi-destination
// subscription sends its control frames through each destination to
// where that copy came from, skipping connections silent for longer than
// the liveness timeout; a known connection is refreshed, not duplicated.
func TestMDSControlToLiveConnections(t *testing.T) {
	t1, t2 := &fakeTransport{}, &fakeTransport{}
	a1, a2 := netip.MustParseAddrPort("127.0.0.1:1001"), netip.MustParseAddrPort("127.0.0.1:1002")
	e := &receiveEndpoint{mds: true, livenessNs: 1e9, batch: make([][]byte, 1)}
	im := &publicationImage{e: e}
	im.connection(t1, a1, 0)
	im.connection(t2, a2, 0)
	im.connection(t2, a2, 5e9) // refreshed
	require.Len(t, im.conns, 2)
	r := &receiver{nowNs: 5.5e9}
	im.sendControl(r, []byte{1, 2, 3})
	require.Empty(t, t1.sent(), "a connection silent for 5.5 s got a control frame")
	require.Equal(t, []fakeDatagram{{a2, []byte{1, 2, 3}}}, t2.sent())
	im.connection(t1, a1, 5.5e9)
	im.sendControl(r, []byte{4})
	require.Len(t, t1.sent(), 1, "a connection heard from again gets control frames")
}
