package driver

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/uri"
)

// slowMedia is a BackgroundOpener whose Opens wait for the test: each
// Open blocks until a result is sent on its gate.
type slowMedia struct {
	fakeMedia
	mu     sync.Mutex
	gates  []chan error
	opened chan struct{}
}

func (m *slowMedia) CheckOpen(_ *uri.ChannelURI, bind, connect netip.AddrPort, _ TransportParams, _ Affinity) error {
	if connect.Port() == 9 {
		return errors.New("port 9 is refused at once")
	}
	return nil
}

func (m *slowMedia) OpenContext(ctx context.Context, u *uri.ChannelURI, bind, connect netip.AddrPort, p TransportParams, a Affinity) (Transport, error) {
	gate := make(chan error)
	m.mu.Lock()
	m.gates = append(m.gates, gate)
	m.mu.Unlock()
	m.opened <- struct{}{}
	select {
	case err := <-gate:
		if err != nil {
			return nil, err
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return m.fakeMedia.Open(u, bind, connect, p, a)
}

func (m *slowMedia) gate(i int) chan error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gates[i]
}

// TestSendEndpointOpensInBackground (issue 29): a medium whose Open waits
// on the fabric never holds up the conductor: the publication is ready at
// once with its endpoint INITIALIZING; meanwhile an IPC stream flows and
// the driver heartbeat moves; the endpoint becomes ACTIVE (its
// publications go to the sender) or ERRORED (error log, and
// CHANNEL_ENDPOINT_ERROR to clients naming its status counter), and the
// next publication tries again; publications closed while it opens leave
// nothing behind.
func TestSendEndpointOpensInBackground(t *testing.T) {
	m := &slowMedia{opened: make(chan struct{}, 8)}
	cfg := udpTestConfig(t)
	cfg.PublicationLingerTimeout = 10 * time.Millisecond
	d, err := Start(cfg, WithMedia(m))
	require.NoError(t, err)
	defer d.Close()
	asyncErrs := make(chan error, 8)
	cl, err := client.Connect(context.Background(), client.Options{Dir: d.Dir(), OnError: func(err error) { asyncErrs <- err }})
	require.NoError(t, err)
	defer cl.Close()
	ctx := context.Background()

	_, err = cl.AddPublication(ctx, "aeron:udp?endpoint=10.0.0.2:9", 1)
	require.ErrorContains(t, err, "port 9 is refused at once", "CheckOpen's refusal answers the command")

	start := time.Now()
	pub, err := cl.AddPublication(ctx, "aeron:udp?endpoint=10.0.0.2:4000", 1)
	require.NoError(t, err)
	<-m.opened
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.EqualValues(t, client.ChannelStatusInitializing, pub.ChannelStatus())
	assert.False(t, pub.IsConnected())

	// the conductor is free: an IPC stream flows, the heartbeat moves
	f, err := cnc.OpenFile(cnc.Path(d.Dir()), false)
	require.NoError(t, err)
	defer f.Close()
	hb := f.DriverHeartbeat()
	ipub, err := cl.AddPublication(ctx, "aeron:ipc", 2)
	require.NoError(t, err)
	isub, err := cl.AddSubscription(ctx, "aeron:ipc", 2)
	require.NoError(t, err)
	msg, got := make([]byte, 64), 0
	end := time.Now().Add(30 * time.Second)
	for sent := 0; got < 10000; {
		require.True(t, time.Now().Before(end), "IPC stream: %d of 10000", got)
		if sent < 10000 && ipub.Offer(msg) > 0 {
			sent++
		}
		isub.Poll(func([]byte, *logbuffer.Header) { got++ }, 100)
	}
	require.Eventually(t, func() bool { return f.DriverHeartbeat() > hb }, 5*time.Second, time.Millisecond, "the driver heartbeat moves")

	// the open completes: ACTIVE, the local address known, and the
	// publication with the sender (it sends SETUP)
	m.gate(0) <- nil
	require.Eventually(t, func() bool { return pub.ChannelStatus() == client.ChannelStatusActive }, 10*time.Second, time.Millisecond)
	require.Eventually(t, func() bool {
		tr := m.transport(netip.MustParseAddrPort("0.0.0.0:0"))
		return tr != nil && len(tr.sent()) > 0
	}, 10*time.Second, time.Millisecond, "the publication sends once its endpoint is open")

	// a failed open: ERRORED, reported to clients by status counter id
	bad, err := cl.AddPublication(ctx, "aeron:udp?endpoint=10.0.0.3:4000", 1)
	require.NoError(t, err)
	<-m.opened
	m.gate(1) <- errors.New("no route to 10.0.0.3")
	require.Eventually(t, func() bool { return bad.ChannelStatus() == client.ChannelStatusErrored }, 10*time.Second, time.Millisecond)
	select {
	case err := <-asyncErrs:
		var de *client.DriverError
		require.ErrorAs(t, err, &de)
		assert.Equal(t, client.ChannelEndpointError, de.Code)
		assert.EqualValues(t, bad.ChannelStatusID(), de.CorrelationID)
		assert.Contains(t, de.Message, "no route to 10.0.0.3")
	case <-time.After(10 * time.Second):
		t.Fatal("no CHANNEL_ENDPOINT_ERROR")
	}
	// the next publication on the channel opens a new endpoint
	again, err := cl.AddExclusivePublication(ctx, "aeron:udp?endpoint=10.0.0.3:4000", 1)
	require.NoError(t, err)
	<-m.opened
	assert.NotEqual(t, bad.ChannelStatusID(), again.ChannelStatusID())
	require.NoError(t, again.Close())
	require.NoError(t, bad.Close())
	// closed while opening (drained and lingered 10 ms): the transport
	// the open gives is closed
	time.Sleep(300 * time.Millisecond)
	m.gate(2) <- nil
	require.Eventually(t, func() bool {
		m.fakeMedia.mu.Lock()
		defer m.fakeMedia.mu.Unlock()
		last := m.fakeMedia.transports[len(m.fakeMedia.transports)-1]
		last.mu.Lock()
		defer last.mu.Unlock()
		return last.closed
	}, 10*time.Second, time.Millisecond, "the late transport closed")

	// the driver closes while an open waits on the fabric: the open is
	// told to stop, and Close does not wait for the fabric
	_, err = cl.AddPublication(ctx, "aeron:udp?endpoint=10.0.0.4:4000", 1)
	require.NoError(t, err)
	<-m.opened
	closed := make(chan struct{})
	go func() { d.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waits for an open that never ends")
	}
}

// statMedia keeps two statistics.
type statMedia struct {
	fakeMedia
	drops, events atomic.Int64
}

func (m *statMedia) Name() string { return "ib" }

func (m *statMedia) Statistics() []MediaStatistic {
	return []MediaStatistic{{Name: "receive queue empty drops", Value: &m.drops}, {Name: "events", Value: &m.events}}
}

// TestMediaStatisticsInCnC (issue 29): a medium's own statistics are CnC
// counters of type cnc.TypeMediaStatistic, labelled "aeron:<medium>:
// <name>", and follow the medium's values.
func TestMediaStatisticsInCnC(t *testing.T) {
	m := &statMedia{}
	d, err := Start(udpTestConfig(t), WithMedia(m))
	require.NoError(t, err)
	defer d.Close()
	m.drops.Store(7)
	m.events.Add(3)
	f, err := cnc.OpenFile(cnc.Path(d.Dir()), false)
	require.NoError(t, err)
	defer f.Close()
	read := func() map[string]int64 {
		r, err := f.Counters()
		require.NoError(t, err)
		got := map[string]int64{}
		r.ForEach(func(c cnc.Counter) bool {
			if c.TypeID == cnc.TypeMediaStatistic {
				got[c.Label] = c.Value
			}
			return true
		})
		return got
	}
	require.Eventually(t, func() bool {
		got := read()
		return got["aeron:ib: receive queue empty drops"] == 7 && got["aeron:ib: events"] == 3
	}, 5*time.Second, time.Millisecond, "%v", read())
	m.drops.Add(1)
	require.Eventually(t, func() bool { return read()["aeron:ib: receive queue empty drops"] == 8 }, 5*time.Second, time.Millisecond)
}

// TestSendEndpointReResolves (issue 28): a send endpoint named by a host
// name that hears no status message resolves the name again every
// AERON_DRIVER_RERESOLUTION_CHECK_INTERVAL, off the conductor; a new
// address reconnects the transport, the publications send there, and
// system counter 25 counts the change; a name that no longer resolves
// goes to the error log. The endpoint keeps its name: a publication added
// after the change shares it.
func TestSendEndpointReResolves(t *testing.T) {
	var mu sync.Mutex
	addr := netip.MustParseAddr("10.0.0.2")
	fail := false
	lookupNetIP = func(_ context.Context, _, host string) ([]netip.Addr, error) {
		mu.Lock()
		defer mu.Unlock()
		if host != "peer.test" || fail {
			return nil, errors.New("no such host")
		}
		return []netip.Addr{addr}, nil
	}
	oldAfter := reresolveAfterNs
	reresolveAfterNs = int64(50 * time.Millisecond)
	t.Cleanup(func() { lookupNetIP, reresolveAfterNs = net.DefaultResolver.LookupNetIP, oldAfter })

	m := &fakeMedia{}
	cfg := udpTestConfig(t)
	cfg.ReResolutionCheckInterval = 20 * time.Millisecond
	d, cl := startWithClient(t, cfg, m, client.Options{})
	ctx := context.Background()
	pub, err := cl.AddPublication(ctx, "aeron:udp?endpoint=peer.test:4000", 1)
	require.NoError(t, err)
	tr := m.transports[0]
	sentTo := func(a string) bool {
		for _, dg := range tr.sent() {
			if dg.addr.String() == a {
				return true
			}
		}
		return false
	}
	require.Eventually(t, func() bool { return sentTo("10.0.0.2:4000") }, 10*time.Second, time.Millisecond, "SETUP to the first address")

	mu.Lock()
	addr = netip.MustParseAddr("10.0.0.3")
	mu.Unlock()
	require.Eventually(t, func() bool { return sentTo("10.0.0.3:4000") }, 10*time.Second, time.Millisecond, "SETUP to the new address")
	tr.mu.Lock()
	assert.Equal(t, []netip.AddrPort{netip.MustParseAddrPort("10.0.0.3:4000")}, tr.reconnects)
	tr.mu.Unlock()
	assert.EqualValues(t, 1, d.c.sys[sysResolutionChanges].Load())

	again, err := cl.AddPublication(ctx, "aeron:udp?endpoint=peer.test:4000|term-length=64k", 2)
	require.NoError(t, err)
	assert.Equal(t, pub.ChannelStatusID(), again.ChannelStatusID(), "one endpoint for the name")

	mu.Lock()
	fail = true
	mu.Unlock()
	require.Eventually(t, func() bool {
		var texts []string
		_, _ = cnc.ReadErrorLog(d.cnc.ErrorLogBuffer(), 0, func(o cnc.Observation) { texts = append(texts, o.Text) })
		for _, x := range texts {
			if strings.Contains(x, "Unresolved - endpoint=peer.test") {
				return true
			}
		}
		return false
	}, 10*time.Second, time.Millisecond, "the failed re-resolution is in the error log")
}

// startWithClient starts a driver with medium m and connects a client to
// it (opts.Dir is set); both close with the test.
func startWithClient(t *testing.T, cfg Config, m Media, opts client.Options) (*Driver, *client.Client) {
	t.Helper()
	d, err := Start(cfg, WithMedia(m))
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	opts.Dir = d.Dir()
	cl, err := client.Connect(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	return d, cl
}

// TestDestinationAndControlReResolve (issue 28): a manual MDC destination
// and a subscription's control= given by host name are resolved again,
// off the conductor, once silent for the destination timeout
// (aeron_udp_destination_tracker_check_for_re_resolution,
// aeron_receive_channel_endpoint_check_for_re_resolution): SETUPs go to the
// destination's new address and the subscription's requests for SETUP go
// to the control's, each counted in system counter 25.
func TestDestinationAndControlReResolve(t *testing.T) {
	var mu sync.Mutex
	addrs := map[string]netip.Addr{"dest.test": netip.MustParseAddr("10.0.0.2"), "ctl.test": netip.MustParseAddr("10.0.1.2")}
	lookupNetIP = func(_ context.Context, _, host string) ([]netip.Addr, error) {
		mu.Lock()
		defer mu.Unlock()
		a, ok := addrs[host]
		if !ok {
			return nil, errors.New("no such host")
		}
		return []netip.Addr{a}, nil
	}
	oldAfter := reresolveAfterNs
	reresolveAfterNs = int64(50 * time.Millisecond)
	t.Cleanup(func() { lookupNetIP, reresolveAfterNs = net.DefaultResolver.LookupNetIP, oldAfter })
	m := &fakeMedia{}
	cfg := udpTestConfig(t)
	cfg.ReResolutionCheckInterval = 20 * time.Millisecond
	d, cl := startWithClient(t, cfg, m, client.Options{})
	ctx := context.Background()
	pub, err := cl.AddPublication(ctx, "aeron:udp?control-mode=manual", 1)
	require.NoError(t, err)
	require.NoError(t, pub.AddDestination(ctx, "aeron:udp?endpoint=dest.test:4000"))
	_, err = cl.AddSubscription(ctx, "aeron:udp?endpoint=127.0.0.1:4100|control=ctl.test:4200", 2)
	require.NoError(t, err)
	sentTo := func(a string) bool {
		m.mu.Lock()
		trs := append([]*fakeTransport(nil), m.transports...)
		m.mu.Unlock()
		for _, tr := range trs {
			for _, dg := range tr.sent() {
				if dg.addr.String() == a {
					return true
				}
			}
		}
		return false
	}
	require.Eventually(t, func() bool { return sentTo("10.0.0.2:4000") && sentTo("10.0.1.2:4200") }, 10*time.Second, time.Millisecond,
		"SETUP to the destination and requests for SETUP to the control address")
	mu.Lock()
	addrs["dest.test"], addrs["ctl.test"] = netip.MustParseAddr("10.0.0.3"), netip.MustParseAddr("10.0.1.3")
	mu.Unlock()
	require.Eventually(t, func() bool { return sentTo("10.0.0.3:4000") && sentTo("10.0.1.3:4200") }, 10*time.Second, time.Millisecond,
		"both went to the new addresses")
	require.Eventually(t, func() bool { return d.c.sys[sysResolutionChanges].Load() == 2 }, 5*time.Second, time.Millisecond)
}
