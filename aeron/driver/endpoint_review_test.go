package driver

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/protocol"
)

// setupsByAddress lists, per destination, the streams and sessions a fake
// transport sent SETUP frames for.
func setupsByAddress(tr *fakeTransport) map[string]map[[2]int32]bool {
	got := map[string]map[[2]int32]bool{}
	for _, dg := range tr.sent() {
		var s protocol.Setup
		if s.Decode(dg.b) == nil {
			if got[dg.addr.String()] == nil {
				got[dg.addr.String()] = map[[2]int32]bool{}
			}
			got[dg.addr.String()][[2]int32{s.StreamID, s.SessionID}] = true
		}
	}
	return got
}

// TestManualMDCPublicationsNotShared (review of issue 28's endpoints): a
// channel that names no address (control-mode=manual without control=)
// gets an endpoint of its own per publication, as C's unique canonical
// form, so one publication's destinations never receive another's stream.
func TestManualMDCPublicationsNotShared(t *testing.T) {
	m := &fakeMedia{}
	_, cl := startWithClient(t, udpTestConfig(t), m, client.Options{})
	ctx := context.Background()
	a, err := cl.AddExclusivePublication(ctx, "aeron:udp?control-mode=manual", 1)
	require.NoError(t, err)
	b, err := cl.AddExclusivePublication(ctx, "aeron:udp?control-mode=manual", 1)
	require.NoError(t, err)
	require.NotEqual(t, a.ChannelStatusID(), b.ChannelStatusID(), "two endpoints")
	c, err := cl.AddPublication(ctx, "aeron:udp?control-mode=manual", 1)
	require.NoError(t, err)
	d2, err := cl.AddPublication(ctx, "aeron:udp?control-mode=manual", 1)
	require.NoError(t, err)
	require.NotEqual(t, c.OriginalRegistrationID(), d2.OriginalRegistrationID(), "not one shared publication either")
	require.NoError(t, a.AddDestination(ctx, "aeron:udp?endpoint=10.9.9.9:5000"))
	time.Sleep(300 * time.Millisecond)
	for _, tr := range m.transports {
		for to, ss := range setupsByAddress(tr) {
			if to != "10.9.9.9:5000" {
				continue
			}
			for k := range ss {
				assert.Equal(t, a.SessionID(), k[1], "only a's session goes to a's destination")
			}
		}
	}
}

// TestFailedEndpointNotJoined (review): after an endpoint's open failed,
// a non-exclusive publication of the same channel and stream does not
// join the dead publication: it opens the endpoint again.
func TestFailedEndpointNotJoined(t *testing.T) {
	m := &slowMedia{opened: make(chan struct{}, 8)}
	_, cl := startWithClient(t, udpTestConfig(t), m, client.Options{OnError: func(error) {}})
	ctx := context.Background()
	p1, err := cl.AddPublication(ctx, "aeron:udp?endpoint=10.0.0.3:4000|session-id=77", 1)
	require.NoError(t, err)
	<-m.opened
	m.gate(0) <- errors.New("no route")
	require.Eventually(t, func() bool { return p1.ChannelStatus() == client.ChannelStatusErrored }, 5*time.Second, time.Millisecond)
	p2, err := cl.AddPublication(ctx, "aeron:udp?endpoint=10.0.0.3:4000|session-id=77", 1)
	require.NoError(t, err, "the dead publication holds neither the stream nor its session id")
	require.NotEqual(t, p1.OriginalRegistrationID(), p2.OriginalRegistrationID())
	select {
	case <-m.opened:
	case <-time.After(5 * time.Second):
		t.Fatal("no new open")
	}
	m.gate(1) <- nil
	require.Eventually(t, func() bool { return p2.ChannelStatus() == client.ChannelStatusActive }, 5*time.Second, time.Millisecond)
}

// TestNamedEndpointOneAddress (review): publications that share an
// endpoint named by a host name send to its one current address, even
// when the name resolves elsewhere by the time a later one is added.
func TestNamedEndpointOneAddress(t *testing.T) {
	addr := netip.MustParseAddr("10.0.0.2")
	var mu sync.Mutex
	lookupNetIP = func(_ context.Context, _, host string) ([]netip.Addr, error) {
		mu.Lock()
		defer mu.Unlock()
		return []netip.Addr{addr}, nil
	}
	t.Cleanup(func() { lookupNetIP = net.DefaultResolver.LookupNetIP })
	m := &fakeMedia{}
	cfg := udpTestConfig(t)
	cfg.ReResolutionCheckInterval = 0
	_, cl := startWithClient(t, cfg, m, client.Options{})
	ctx := context.Background()
	_, err := cl.AddPublication(ctx, "aeron:udp?endpoint=peer.test:4000", 1)
	require.NoError(t, err)
	mu.Lock()
	addr = netip.MustParseAddr("10.0.0.3")
	mu.Unlock()
	_, err = cl.AddPublication(ctx, "aeron:udp?endpoint=peer.test:4000", 2)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got := setupsByAddress(m.transports[0])
		return len(got["10.0.0.2:4000"]) == 2
	}, 5*time.Second, time.Millisecond, "both streams' SETUPs to the endpoint's address")
	require.Len(t, m.transports, 1)
	require.Empty(t, setupsByAddress(m.transports[0])["10.0.0.3:4000"])
}

// TestSlowNameDoesNotHoldConductor (issue 28): a channel naming a host
// whose lookup hangs is set aside while the name is looked up off the
// conductor; meanwhile the conductor adds other publications and keeps
// its heartbeat; once the lookup returns, the first publication is added
// at the address it gave. A lookup that fails gets UNKNOWN_HOST.
func TestSlowNameDoesNotHoldConductor(t *testing.T) {
	release := make(chan struct{})
	lookupNetIP = func(ctx context.Context, _, host string) ([]netip.Addr, error) {
		if host == "dead.test" {
			return nil, errors.New("no such host")
		}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return []netip.Addr{netip.MustParseAddr("10.0.0.7")}, nil
	}
	t.Cleanup(func() { lookupNetIP = net.DefaultResolver.LookupNetIP })
	m := &fakeMedia{}
	d, cl := startWithClient(t, udpTestConfig(t), m, client.Options{})
	ctx := context.Background()
	slow := make(chan error, 1)
	var slowPub *client.Publication
	go func() {
		p, err := cl.AddPublication(ctx, "aeron:udp?endpoint=slow.test:4000", 1)
		slowPub = p
		slow <- err
	}()
	time.Sleep(50 * time.Millisecond) // the slow add is in
	start := time.Now()
	_, err := cl.AddPublication(ctx, "aeron:udp?endpoint=10.0.0.8:4000", 2)
	require.NoError(t, err)
	require.Less(t, time.Since(start), time.Second, "the other add did not wait for the lookup")
	hb := d.c.rb.ConsumerHeartbeatTime()
	time.Sleep(100 * time.Millisecond)
	require.Greater(t, d.c.rb.ConsumerHeartbeatTime(), hb, "the conductor kept its duty cycle")
	select {
	case err := <-slow:
		t.Fatalf("the slow add finished before its lookup: %v", err)
	default:
	}
	close(release)
	require.NoError(t, <-slow)
	require.Eventually(t, func() bool {
		m.mu.Lock()
		trs := append([]*fakeTransport(nil), m.transports...)
		m.mu.Unlock()
		for _, tr := range trs {
			if len(setupsByAddress(tr)["10.0.0.7:4000"]) == 1 {
				return true
			}
		}
		return false
	}, 5*time.Second, time.Millisecond, "the named publication sends to the looked-up address")
	require.NotNil(t, slowPub)
	var de *client.DriverError
	_, err = cl.AddPublication(ctx, "aeron:udp?endpoint=dead.test:4000", 3)
	require.ErrorAs(t, err, &de)
	require.EqualValues(t, cnc.ErrorCodeUnknownHost, de.Code)
}
