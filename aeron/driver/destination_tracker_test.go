package driver

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDestinationTrackerDynamic(t *testing.T) {
	a, b := netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("127.0.0.1:2")
	d := &destinationTracker{}
	d.onStatusMessage(a, 0)
	d.onStatusMessage(a, 1)
	d.onStatusMessage(b, 2)
	require.Len(t, d.dests, 2)
	d.checkTimeouts(destinationTimeoutNs + 1) // a last seen at 1: still in
	require.Len(t, d.dests, 2)
	d.checkTimeouts(destinationTimeoutNs + 2) // a gone
	require.Equal(t, []mdcDestination{{addr: b, lastSeenNs: 2}}, d.dests)
}

func TestDestinationTrackerManual(t *testing.T) {
	a, b := netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("127.0.0.1:2")
	d := &destinationTracker{manual: true}
	d.onStatusMessage(a, 0) // a manual tracker does not learn destinations
	require.Empty(t, d.dests)
	d.add(a, 10, 0, nil)
	d.add(a, 11, 0, nil) // no duplicates
	d.add(b, 12, 0, nil)
	d.checkTimeouts(10 * destinationTimeoutNs) // manual ones never time out
	require.Len(t, d.dests, 2)
	d.remove(netip.AddrPort{}, 12) // by registration id
	require.Equal(t, a, d.dests[0].addr)
	require.Len(t, d.dests, 1)
	d.remove(a, 0)
	require.Empty(t, d.dests)
}
