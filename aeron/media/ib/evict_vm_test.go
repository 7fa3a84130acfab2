//go:build linux

package ib_test

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/media/ib"
	"github.com/ibgo/ibgo/aeron/uri"
	"github.com/ibgo/ibgo/internal/testutil"
)

// TestIBUDPeerEviction (issue 29): a UD subscription learns an address
// handle for every sender it hears. Twelve publications come and go (as
// restarting publishers do) with MaxPeers at 8: the subscription never
// holds more than 8 address handles, replies to each live sender reach it,
// and once all are gone and PeerIdleTimeout (2 s here) has passed, every
// learnt handle and source name is evicted. A sender after that is learnt
// again.
func TestIBUDPeerEviction(t *testing.T) {
	vm := testutil.OneNode(t)
	oldIdle, oldMax := ib.PeerIdleTimeout, ib.MaxPeers
	ib.PeerIdleTimeout, ib.MaxPeers = 2*time.Second, 8
	defer func() { ib.PeerIdleTimeout, ib.MaxPeers = oldIdle, oldMax }()

	ms, mp := ib.New(), ib.New() // the subscription's counts apart from the publications'
	ep := netip.MustParseAddrPort(vm.IP + ":24597")
	u, err := uri.Parse("aeron:ib?endpoint=" + ep.String())
	require.NoError(t, err)
	p := driver.TransportParams{MTU: 1408, SocketRcvbuf: 128 << 10}
	sub, err := ms.Open(u, ep, netip.AddrPort{}, p, driver.AffinityReceiver)
	require.NoError(t, err)
	defer sub.Close()

	frame := make([]byte, 64)
	most := int64(0)
	exchange := func(i int) {
		pub, err := mp.Open(u, netip.AddrPortFrom(netip.IPv4Unspecified(), 0), ep, p, driver.AffinitySender)
		require.NoError(t, err)
		defer pub.Close()
		var from netip.AddrPort
		binary.LittleEndian.PutUint32(frame, uint32(i))
		waitUntil(t, "a frame from publication", deadline, func() bool {
			_, err := pub.Send(netip.AddrPort{}, [][]byte{frame})
			require.NoError(t, err)
			_, err = sub.Recv(16, func(_ driver.Transport, b []byte, f netip.AddrPort, _ int64) {
				if binary.LittleEndian.Uint32(b) == uint32(i) {
					from = f
				}
			})
			require.NoError(t, err)
			most = max(most, ms.AddressHandles.Load())
			return from.IsValid()
		})
		replied := false
		waitUntil(t, "the reply at the publication", deadline, func() bool {
			_, err := sub.Send(from, [][]byte{frame})
			require.NoError(t, err)
			_, err = pub.Recv(16, func(_ driver.Transport, b []byte, _ netip.AddrPort, _ int64) {
				replied = replied || binary.LittleEndian.Uint32(b) == uint32(i)
			})
			require.NoError(t, err)
			return replied
		})
	}
	for i := range 12 {
		exchange(i)
	}
	t.Logf("after 12 senders: %d address handles held (most %d), %d evicted", ms.AddressHandles.Load(), most, ms.PeersEvicted.Load())
	require.LessOrEqual(t, most, int64(ib.MaxPeers), "address handles held at once")
	require.GreaterOrEqual(t, ms.PeersEvicted.Load(), int64(12-ib.MaxPeers), "the least recently used went at the bound")

	lastUse := time.Now()
	waitUntil(t, "every idle address handle evicted", 10*time.Second, func() bool {
		_, err := sub.Recv(16, func(driver.Transport, []byte, netip.AddrPort, int64) {})
		require.NoError(t, err)
		return ms.AddressHandles.Load() == 0
	})
	require.GreaterOrEqual(t, time.Since(lastUse), ib.PeerIdleTimeout, "evicted before PeerIdleTimeout")
	require.Positive(t, ms.SourcesEvicted.Load(), "source names forgotten")
	t.Logf("idle: %d address handles evicted, %d source names", ms.PeersEvicted.Load(), ms.SourcesEvicted.Load())
	exchange(12) // learnt again
	require.EqualValues(t, 1, ms.AddressHandles.Load())
	require.Zero(t, ms.RecvErrors.Load()+ms.SendErrors.Load())
}
