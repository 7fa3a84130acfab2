package ib_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/media/ib"
	"github.com/ibgo/ibgo/aeron/uri"
)

// TestIBMulticastChannelRules: what Open refuses, without a device.
func TestIBMulticastChannelRules(t *testing.T) {
	m := ib.New()
	parse := func(s string) *uri.ChannelURI {
		u, err := uri.Parse(s)
		require.NoError(t, err)
		return u
	}
	g := netip.MustParseAddrPort("239.1.7.1:24581")
	c := netip.MustParseAddrPort("239.1.7.2:24581")
	// aeron/uri refuses RC multicast first; Open keeps the rule too
	_, err := uri.Parse("aeron:ib?endpoint=239.1.7.1:24581|interface=10.0.0.1|ib-qp=rc")
	require.ErrorContains(t, err, "multicast needs ib-qp=ud")
	u := parse("aeron:ib?endpoint=239.1.7.1:24581|interface=10.0.0.1")
	u.Set(uri.KeyIBQueuePair, uri.IBQueuePairRC)
	_, err = m.Open(u, c, g, driver.TransportParams{}, driver.AffinitySender)
	require.ErrorContains(t, err, "multicast needs ib-qp=ud")
	_, err = m.Open(parse("aeron:ib?endpoint=239.1.7.1:24581"), g, netip.AddrPort{}, driver.TransportParams{}, driver.AffinityReceiver)
	require.ErrorContains(t, err, "needs interface=<local IP of the RDMA device>")
	_, err = m.Open(parse("aeron:ib?endpoint=239.1.7.1:24581|interface=192.0.2.1/32"), g, netip.AddrPort{}, driver.TransportParams{}, driver.AffinityReceiver)
	require.ErrorContains(t, err, "no local interface has an address in 192.0.2.1/32")
	_, err = m.Open(parse("aeron:ib?endpoint=239.1.7.1:24581|interface=10.0.0.1"), netip.MustParseAddrPort("239.1.7.2:24581"), netip.AddrPort{}, driver.TransportParams{}, driver.AffinityReceiver)
	require.ErrorContains(t, err, "must be odd")
}
