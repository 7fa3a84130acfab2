//go:build linux

package ib_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/inspect"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/media/ib"
	"github.com/ibgo/ibgo/aeron/media/udp"
	"github.com/ibgo/ibgo/aeron/uri"
	"github.com/ibgo/ibgo/internal/testutil"
)

// rcDriver starts a driver with the ib medium (and udp) and a client on it.
func rcDriver(t *testing.T) (*driver.Driver, *client.Client, *ib.Media) {
	cfg := driver.DefaultConfig()
	cfg.Dir = filepath.Join(t.TempDir(), "aeron")
	cfg.TermBufferLength = 1 << 20
	cfg.TimerInterval = 50 * time.Millisecond
	cfg.PublicationLingerTimeout = 100 * time.Millisecond
	m := ib.New()
	d, err := driver.Start(cfg, driver.WithMedia(udp.New(udp.Loss{})), driver.WithMedia(m))
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	c, err := client.Connect(context.Background(), client.Options{Dir: d.Dir(), IdleSleep: 100 * time.Microsecond})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return d, c, m
}

func requireNoErrorLog(t *testing.T, d *driver.Driver) {
	f, err := cnc.Open(d.Dir())
	require.NoError(t, err)
	defer f.Close()
	var out bytes.Buffer
	n, err := inspect.Errors(&out, f, time.UTC)
	require.NoError(t, err)
	require.Zero(t, n, "error log: %s", out.String())
}

func requireCleanRC(t *testing.T, m *ib.Media) {
	t.Helper()
	require.Zero(t, m.ResolveErrors.Load(), "failed dials")
	requireCleanRCLink(t, m)
}

// requireCleanRCLink is requireCleanRC for a lossy link: a CM exchange
// whose MADs netem dropped more often than the CM retries them fails one
// dial, which the dial loop repeats (the count is logged, not asserted);
// every connection made must still hold.
func requireCleanRCLink(t *testing.T, m *ib.Media) {
	t.Helper()
	if n := m.ResolveErrors.Load(); n > 0 {
		t.Logf("failed dials (repeated by the dial loop): %d", n)
	}
	require.Zero(t, m.RecvErrors.Load(), "receive completions in error")
	require.Zero(t, m.SendErrors.Load(), "send completions in error")
	require.Zero(t, m.Unresolved.Load(), "frames from an unknown connection")
	require.Zero(t, m.RC.Lost.Load(), "connections lost")
	require.Zero(t, m.RC.Rejected.Load(), "connections rejected")
	require.Zero(t, m.RC.Flushed.Load(), "flushed work requests")
	require.Zero(t, m.RC.CQErrors.Load(), "failed CQ polls")
	require.Zero(t, m.CQRebuilds.Load(), "CQs rebuilt")
}

// TestIBRCLoopback: one driver carries aeron:ib with ib-qp=rc (one
// connection over rxe loopback), aeron:ib with ib-qp=ud and aeron:udp, all
// three on the same host:port at the same time (three endpoints, not one
// shared); every message of each arrives once and in order, no counter of
// the medium moves and the error log stays empty.
func TestIBRCLoopback(t *testing.T) {
	vm := testutil.OneNode(t)
	d, c, m := rcDriver(t)
	hp := vm.IP + ":24581"
	rcs := newStream(t, c, "aeron:ib?endpoint="+hp+"|ib-qp=rc|mtu=4096", 256, false)
	udps := newStream(t, c, "aeron:udp?endpoint="+hp+"|mtu=1408", 256, false)
	uds := newStream(t, c, "aeron:ib?endpoint="+hp+"|mtu=1024", 256, false)

	const nRC, nUDP, nUD = 100_000, 20_000, 20_000
	msg := make([]byte, 256)
	end := time.Now().Add(5 * deadline)
	start := time.Now()
	for rcs.next < nRC || udps.next < nUDP || uds.next < nUD {
		require.False(t, time.Now().After(end), "timed out: rc sent %d got %d, udp sent %d got %d, ud sent %d got %d",
			rcs.sent, rcs.next, udps.sent, udps.next, uds.sent, uds.next)
		rcs.step(nRC, msg)
		udps.step(nUDP, msg)
		uds.step(nUD, msg)
	}
	el := time.Since(start)
	t.Logf("rc %d + udp %d + ud %d messages of 256 B in %v (rc %.0f msg/s alongside both); frames dropped: %d",
		nRC, nUDP, nUD, el, float64(nRC)/el.Seconds(), m.RC.Dropped.Load())
	require.Equal(t, nRC, rcs.next)
	require.Equal(t, nUDP, udps.next)
	require.Equal(t, nUD, uds.next)
	requireCleanRC(t, m)
	require.EqualValues(t, 1, m.RC.Accepted.Load(), "one connection accepted")
	require.EqualValues(t, 1, m.RC.Connected.Load(), "one connection dialled")
	requireNoErrorLog(t, d)
}

// TestIBRCLargeMTU: ib-qp=rc with mtu=16384 (four fabric packets per frame
// at the port's 4096, segmented by the QP): 40,000-byte messages,
// fragmented by Aeron into 16 KiB frames, arrive intact and in order.
func TestIBRCLargeMTU(t *testing.T) {
	vm := testutil.OneNode(t)
	d, c, m := rcDriver(t)
	ch := "aeron:ib?endpoint=" + vm.IP + ":24583|ib-qp=rc|mtu=16384"
	ctx := context.Background()
	sub, err := c.AddSubscription(ctx, ch, 1001)
	require.NoError(t, err)
	pub, err := c.AddPublication(ctx, ch, 1001)
	require.NoError(t, err)
	end := time.Now().Add(deadline)
	for !pub.IsConnected() || !sub.IsConnected() {
		require.False(t, time.Now().After(end), "never connected")
		time.Sleep(time.Millisecond)
	}
	require.EqualValues(t, 16384, pub.MaxPayloadLength()+32, "the publication's mtu")

	const n, size = 2000, 40_000
	fill := func(b []byte, seq int) {
		binary.LittleEndian.PutUint64(b, uint64(seq))
		for i := 8; i < len(b); i++ {
			b[i] = byte(seq*31 + i)
		}
	}
	want := make([]byte, size)
	next := 0
	fh := client.NewFragmentAssembler(func(payload []byte, h *logbuffer.Header) {
		fill(want, next)
		require.True(t, bytes.Equal(want, payload), "message %d (%d bytes) not intact", next, len(payload))
		next++
	}).Handler()
	msg := make([]byte, size)
	sent := 0
	end = time.Now().Add(5 * deadline)
	for next < n {
		require.False(t, time.Now().After(end), "timed out: sent %d got %d", sent, next)
		if sent < n {
			fill(msg, sent)
			if pub.Offer(msg) > 0 {
				sent++
			}
		}
		sub.Poll(fh, 64)
	}
	t.Logf("%d messages of %d B over ib-qp=rc|mtu=16384; frames dropped: %d; %d from the term buffer, %d inline, %d copied",
		n, size, m.RC.Dropped.Load(), m.ZeroCopy.Load(), m.Inline.Load(), m.Copied.Load())
	// the publication's log is registered: data frames leave from it
	require.Greater(t, m.ZeroCopy.Load(), int64(n), "frames posted from the term buffer")
	requireCleanRC(t, m)
	requireNoErrorLog(t, d)
}

// TestIBRCSubscriberRestart: a publisher driver keeps offering while the
// subscriber's driver is closed and another started on the same endpoint:
// the publication's connection is lost, it dials again until the new
// driver listens, and the new image receives in order from where it joins.
func TestIBRCSubscriberRestart(t *testing.T) {
	vm := testutil.OneNode(t)
	pd, pc, pm := rcDriver(t)
	ch := "aeron:ib?endpoint=" + vm.IP + ":24585|ib-qp=rc|mtu=4096"
	ctx := context.Background()
	pub, err := pc.AddPublication(ctx, ch, 1001)
	require.NoError(t, err)

	msg := make([]byte, 256)
	sent := 0
	offer := func() {
		binary.LittleEndian.PutUint64(msg, uint64(sent))
		if pub.Offer(msg) > 0 {
			sent++
		}
	}
	// receive runs one subscriber driver until it has n messages in
	// order from the first it sees, offering all along.
	receive := func(round, n int) {
		cfg := driver.DefaultConfig()
		cfg.Dir = filepath.Join(t.TempDir(), "aeron")
		cfg.TermBufferLength = 1 << 20
		cfg.TimerInterval = 50 * time.Millisecond
		sm := ib.New()
		d, err := driver.Start(cfg, driver.WithMedia(sm))
		require.NoError(t, err)
		defer d.Close()
		c, err := client.Connect(ctx, client.Options{Dir: d.Dir(), IdleSleep: 100 * time.Microsecond})
		require.NoError(t, err)
		defer c.Close()
		sub, err := c.AddSubscription(ctx, ch, 1001)
		require.NoError(t, err)
		first, next := -1, 0
		fh := client.NewFragmentAssembler(func(payload []byte, h *logbuffer.Header) {
			got := int(binary.LittleEndian.Uint64(payload))
			if first < 0 {
				first, next = got, got
			}
			require.Equal(t, next, got, "round %d: message out of order or duplicated", round)
			next++
		}).Handler()
		end := time.Now().Add(2 * deadline)
		for first < 0 || next-first < n {
			require.False(t, time.Now().After(end), "round %d timed out: sent %d, first %d next %d; publisher: connected %d disconnected %d lost %d dropped %d",
				round, sent, first, next, pm.RC.Connected.Load(), pm.RC.Disconnected.Load(), pm.RC.Lost.Load(), pm.RC.Dropped.Load())
			offer()
			sub.Poll(fh, 64)
		}
		t.Logf("round %d: messages %d..%d received in order (publisher sent %d)", round, first, next-1, sent)
		require.Zero(t, sm.RecvErrors.Load()+sm.SendErrors.Load(), "subscriber's completions in error")
		require.EqualValues(t, 1, sm.RC.Accepted.Load())
	}
	receive(1, 5000)
	// the first subscriber driver is closed: keep offering a while
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
		offer()
	}
	receive(2, 5000)
	require.GreaterOrEqual(t, pm.RC.Disconnected.Load(), int64(1), "the publication saw its connection go")
	require.GreaterOrEqual(t, pm.RC.Connected.Load(), int64(2), "and dialled again")
	// a subscriber's driver closing is an orderly disconnect, as a
	// vanished aeron:udp subscriber: counted, not an error
	require.Zero(t, pm.RC.Lost.Load(), "connections lost abnormally")
	text, n := errorLog(t, pd)
	require.Zero(t, n, "publisher error log:\n%s", text)
	t.Logf("publisher: connected %d, disconnected %d, dial failures %d, flushed %d, frames dropped %d",
		pm.RC.Connected.Load(), pm.RC.Disconnected.Load(), pm.ResolveErrors.Load(), pm.RC.Flushed.Load(), pm.RC.Dropped.Load())
}

// TestIBRCPublicationMTUGrows (issue 29): a subscription that names no mtu
// takes a publication with mtu=8192, as Aeron receivers take any mtu a
// SETUP names: the CONNECT says the mtu, the subscription asks it to come
// again while it rebuilds its shared receive queue with 8 KiB buffers, and
// the publication already connected (default mtu) loses its connection to
// the rebuild, dials again, and its stream goes on. Both streams arrive
// whole, once and in order; nothing is refused; no error reaches a client.
// Multicast with rc is refused by the channel rule, at once.
func TestIBRCPublicationMTUGrows(t *testing.T) {
	vm := testutil.OneNode(t)
	d, c, m := rcDriver(t)
	errs := make(chan error, 4)
	ce, err := client.Connect(context.Background(), client.Options{Dir: d.Dir(), IdleSleep: 100 * time.Microsecond,
		OnError: func(err error) { errs <- err }})
	require.NoError(t, err)
	t.Cleanup(func() { ce.Close() })
	ep := "aeron:ib?endpoint=" + vm.IP + ":24587|ib-qp=rc"
	ctx := context.Background()
	type flow struct {
		sub        *client.Subscription
		pub        *client.Publication
		size       int
		sent, next int
		fh         logbuffer.FragmentHandler
	}
	fill := func(b []byte, seq int) {
		binary.LittleEndian.PutUint64(b, uint64(seq))
		for i := 8; i < len(b); i++ {
			b[i] = byte(seq*7 + i)
		}
	}
	open := func(pc *client.Client, stream int32, pubChannel string, size int) *flow {
		f := &flow{size: size}
		f.sub, err = c.AddSubscription(ctx, ep, stream)
		require.NoError(t, err)
		f.pub, err = pc.AddPublication(ctx, pubChannel, stream)
		require.NoError(t, err)
		want := make([]byte, size)
		f.fh = client.NewFragmentAssembler(func(payload []byte, _ *logbuffer.Header) {
			fill(want, f.next)
			require.True(t, bytes.Equal(want, payload), "stream %d: message %d not intact, or out of order", stream, f.next)
			f.next++
		}).Handler()
		return f
	}
	small := open(ce, 1001, ep, 1000)
	waitUntil(t, "the default-mtu publication connected", deadline, func() bool { return small.pub.IsConnected() && small.sub.IsConnected() })
	// from a second driver: a driver's publications of one endpoint share
	// its send endpoint, whose buffers are sized at its first mtu
	_, c2, _ := rcDriver(t)
	large := open(c2, 1002, ep+"|mtu=8192", 6000) // one 6,000-byte frame per message: above the subscription's 1408
	const n = 3000
	msg := make([]byte, 6000)
	end := time.Now().Add(5 * deadline)
	for small.next < n || large.next < n {
		require.False(t, time.Now().After(end), "timed out: small sent %d got %d, large sent %d got %d (growths %d, lost %d)",
			small.sent, small.next, large.sent, large.next, m.RC.MTUGrowths.Load(), m.RC.Lost.Load())
		for _, f := range []*flow{small, large} {
			if f.sent < n {
				fill(msg[:f.size], f.sent)
				if f.pub.Offer(msg[:f.size]) > 0 {
					f.sent++
				}
			}
			f.sub.Poll(f.fh, 64)
		}
	}
	require.EqualValues(t, 8192, large.pub.MaxPayloadLength()+32, "the publication's mtu")
	require.EqualValues(t, 1, m.RC.MTUGrowths.Load(), "the subscription grew its buffers once")
	require.Zero(t, m.RC.Rejected.Load(), "nothing refused")
	require.Zero(t, m.RC.CQErrors.Load())
	require.Zero(t, m.RecvErrors.Load())
	t.Logf("both streams of %d messages whole and in order; connections lost to the rebuild %d, accepted %d", n, m.RC.Lost.Load(), m.RC.Accepted.Load())
	select {
	case err := <-errs:
		t.Fatalf("a client got an error: %v", err)
	default:
	}

	_, err = c.AddPublication(ctx, "aeron:ib?endpoint=224.0.1.1:24589|ib-qp=rc", 1001)
	require.ErrorContains(t, err, "INVALID_CHANNEL")
	require.ErrorContains(t, err, "multicast needs ib-qp=ud: a reliable connection (ib-qp=rc) joins exactly two queue pairs")
}

// rxeCounter reads one of the soft-RoCE device's hw_counters (0 if absent).
func rxeCounter(name string) int64 {
	paths, _ := filepath.Glob("/sys/class/infiniband/*/ports/1/hw_counters/" + name)
	var sum int64
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		sum += n
	}
	return sum
}

// TestIBRCNetemTwoNodes: ib-qp=rc across the qemu link with tc netem on
// both guests' ends (5 % loss, 2 % duplication, reordering): the QPs' own
// retransmission repairs the fabric, so every message arrives once and in
// order and no connection is lost. Node 1 publishes, node 2 subscribes and
// reports over TCP when it has everything.
func TestIBRCNetemTwoNodes(t *testing.T) {
	vm := testutil.TwoNodes(t)
	if _, err := exec.LookPath("tc"); err != nil {
		t.Fatalf("tc is not in the guest image: %v", err)
	}
	args := []string{"qdisc", "replace", "dev", vm.Netdev, "root", "netem", "delay", "2ms", "reorder", "25%", "50%", "loss", "5%", "duplicate", "2%"}
	out, err := exec.Command("tc", args...).CombinedOutput()
	require.NoError(t, err, "tc %s: %s", strings.Join(args, " "), out)
	t.Cleanup(func() {
		out, _ := exec.Command("tc", "-s", "qdisc", "show", "dev", vm.Netdev).CombinedOutput()
		t.Logf("netem on %s at the end: %s", vm.Netdev, out)
		_ = exec.Command("tc", "qdisc", "del", "dev", vm.Netdev, "root").Run()
	})
	d, c, m := rcDriver(t)
	t.Cleanup(func() {
		if t.Failed() { // what the medium saw, for the post-mortem
			text, _ := errorLog(t, d)
			t.Logf("node %d: accepted %d connected %d lost %d flushed %d dropped %d cq errors %d rebuilds %d send/recv errors %d/%d; error log:\n%s",
				vm.Node, m.RC.Accepted.Load(), m.RC.Connected.Load(), m.RC.Lost.Load(), m.RC.Flushed.Load(), m.RC.Dropped.Load(),
				m.RC.CQErrors.Load(), m.CQRebuilds.Load(), m.SendErrors.Load(), m.RecvErrors.Load(), text)
		}
	})
	ctx := context.Background()
	const n, donePort = 10_000, 24597
	if vm.Node == 2 {
		sub, err := c.AddSubscription(ctx, "aeron:ib?endpoint="+vm.IP+":24595|ib-qp=rc|mtu=4096", 1001)
		require.NoError(t, err)
		next := 0
		// the longest wait between two polls that delivered something: a
		// stall longer than the image liveness timeout ends the image
		last, stall := time.Now(), time.Duration(0)
		fh := client.NewFragmentAssembler(func(payload []byte, h *logbuffer.Header) {
			require.Equal(t, next, int(binary.LittleEndian.Uint64(payload)),
				"out of order or duplicated (session %d, position %d; longest stall %v, this one %v; rc disconnected %d lost %d; rxe duplicate requests %d, out-of-sequence %d, rnr sent %d)",
				h.SessionID(), h.Position(), stall, time.Since(last), m.RC.Disconnected.Load(), m.RC.Lost.Load(),
				rxeCounter("duplicate_request"), rxeCounter("out_of_seq_request"), rxeCounter("send_rnr_err"))
			next++
		}).Handler()
		end := time.Now().Add(4 * deadline)
		for next < n {
			require.False(t, time.Now().After(end), "received %d of %d", next, n)
			if sub.Poll(fh, 256) == 0 {
				time.Sleep(100 * time.Microsecond)
			} else {
				if next > 0 {
					stall = max(stall, time.Since(last))
				}
				last = time.Now()
			}
		}
		t.Logf("node 2: longest stall between deliveries %v", stall)
		t.Logf("node 2: %d messages in order; rxe: duplicate requests %d, out-of-sequence requests %d",
			n, rxeCounter("duplicate_request"), rxeCounter("out_of_seq_request"))
		requireCleanRCLink(t, m)
		var conn net.Conn
		for end := time.Now().Add(deadline); ; {
			conn, err = net.DialTimeout("tcp", net.JoinHostPort(vm.Peer, strconv.Itoa(donePort)), 5*time.Second)
			if err == nil || time.Now().After(end) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		require.NoError(t, err, "telling node 1 the subscriber is done")
		defer conn.Close()
		_, err = conn.Write([]byte("done\n"))
		require.NoError(t, err)
		// Keep the connection up until node 1 has read its counters: closing
		// this driver disconnects the QP, which node 1 counts as lost.
		conn.SetReadDeadline(time.Now().Add(2 * deadline))
		_, _ = bufio.NewReader(conn).ReadString('\n')
		return
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(vm.IP, strconv.Itoa(donePort)))
	require.NoError(t, err)
	defer ln.Close()
	pub, err := c.AddPublication(ctx, "aeron:ib?endpoint="+vm.Peer+":24595|ib-qp=rc|mtu=4096", 1001)
	require.NoError(t, err)
	end := time.Now().Add(2 * deadline)
	for !pub.IsConnected() {
		require.False(t, time.Now().After(end), "the subscriber on node 2 never connected")
		time.Sleep(10 * time.Millisecond)
	}
	msg := make([]byte, 256)
	end = time.Now().Add(4 * deadline)
	for i := 0; i < n; {
		binary.LittleEndian.PutUint64(msg, uint64(i))
		if pub.Offer(msg) > 0 {
			i++
		} else {
			time.Sleep(50 * time.Microsecond)
		}
		require.False(t, time.Now().After(end), "timed out offering: sent %d", i)
	}
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(4 * deadline))
	var conn net.Conn
	for {
		// a connection that ends without the line is a dial node 2
		// gave up on (see sendDone); it dials again
		conn, err = ln.Accept()
		require.NoError(t, err, "waiting for node 2 to report every message")
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err == nil || line != "" {
			require.NoError(t, err)
			require.Equal(t, "done\n", line)
			break
		}
		conn.Close()
	}
	defer conn.Close()
	retries := rxeCounter("completer_retry_err")
	t.Logf("node 1: rxe requester retries %d, rnr retries %d; frames dropped on a full send queue %d",
		retries, rxeCounter("rcvd_rnr_err"), m.RC.Dropped.Load())
	require.Positive(t, retries, "the loss was repaired by the QP's retransmission")
	requireCleanRCLink(t, m)
	_, err = conn.Write([]byte("checked\n"))
	require.NoError(t, err, "releasing node 2")
}

// TestIBRCTransportRoundTrip drives the two transports directly: a frame
// from the publication's transport arrives at the subscription's with the
// connection's address, the reply sent to that address arrives at the
// publication's from its endpoint, and a round trip allocates nothing.
func TestIBRCTransportRoundTrip(t *testing.T) {
	vm := testutil.OneNode(t)
	m := ib.New()
	ep := netip.MustParseAddrPort(vm.IP + ":24599")
	u, err := uri.Parse("aeron:ib?endpoint=" + ep.String() + "|ib-qp=rc|mtu=4096")
	require.NoError(t, err)
	p := driver.TransportParams{MTU: 4096, SocketRcvbuf: 128 << 10}
	sub, err := m.Open(u, ep, netip.AddrPort{}, p, driver.AffinityReceiver)
	require.NoError(t, err)
	defer sub.Close()
	pub, err := m.Open(u, netip.AddrPortFrom(netip.IPv4Unspecified(), 0), ep, p, driver.AffinitySender)
	require.NoError(t, err)
	defer pub.Close()
	require.NotEqual(t, "0.0.0.0:0", pub.LocalAddr(), "connected in Open")

	frame := make([]byte, 3000)
	for i := range frame {
		frame[i] = byte(i)
	}
	batch := [][]byte{frame}
	var from, replyFrom netip.AddrPort
	got, replies, bad := 0, 0, 0
	onSub := func(_ driver.Transport, buf []byte, f netip.AddrPort, _ int64) {
		if !bytes.Equal(buf, frame) {
			bad++
		}
		got++
		from = f
	}
	onPub := func(_ driver.Transport, buf []byte, f netip.AddrPort, _ int64) {
		if len(buf) != len(frame) {
			bad++
		}
		replies++
		replyFrom = f
	}
	roundTrip := func() bool {
		g, r := got, replies
		if n, err := pub.Send(netip.AddrPort{}, batch); n != 1 || err != nil {
			return false
		}
		for i := 0; got == g && i < 10_000_000; i++ {
			sub.Recv(16, onSub)
		}
		if n, err := sub.Send(from, batch); n != 1 || err != nil {
			return false
		}
		for i := 0; replies == r && i < 10_000_000; i++ {
			pub.Recv(16, onPub)
		}
		return got == g+1 && replies == r+1
	}
	for i := 0; i < 100; i++ { // warm up: the connections are handed over
		require.True(t, roundTrip(), "round trip %d", i)
	}
	require.Equal(t, ep, replyFrom, "replies come from the endpoint")
	require.Equal(t, pub.LocalAddr(), from.String(), "frames come from the publication's connection")
	ok := true
	allocs := testing.AllocsPerRun(1000, func() { ok = roundTrip() && ok })
	require.True(t, ok)
	require.Zero(t, bad, "frames not intact")
	require.Zero(t, allocs, "allocations per round trip")
	require.Zero(t, m.RC.Dropped.Load()+m.RC.Lost.Load()+m.SendErrors.Load()+m.RecvErrors.Load())

	// both ends' QPs retransmit after ib.RCAckTimeout, the accepting one
	// (whose status messages and NAKs go back on it) too
	for _, tr := range []driver.Transport{pub, sub} {
		ts, err := ib.RCAckTimeouts(tr)
		require.NoError(t, err)
		require.Equal(t, []uint8{ib.RCAckTimeout}, ts, "%s's QP ACK timeout", tr.LocalAddr())
	}
}

// TestIBRCPublicationsShareConnection (issue 29): 32 publications of one
// channel (32 streams) share the channel's send endpoint and so one RC
// connection, as C shares one socket per send channel endpoint: one
// connection dialled and accepted, every stream's messages once and in
// order.
func TestIBRCPublicationsShareConnection(t *testing.T) {
	vm := testutil.OneNode(t)
	d, c, m := rcDriver(t)
	ch := "aeron:ib?endpoint=" + vm.IP + ":24591|ib-qp=rc"
	ctx := context.Background()
	const streams, n = 32, 500
	subs := make([]*client.Subscription, streams)
	pubs := make([]*client.Publication, streams)
	for i := range streams {
		var err error
		subs[i], err = c.AddSubscription(ctx, ch, int32(2000+i))
		require.NoError(t, err)
		pubs[i], err = c.AddPublication(ctx, ch, int32(2000+i))
		require.NoError(t, err)
	}
	waitUntil(t, "32 publications connected", deadline, func() bool {
		for i := range streams {
			if !pubs[i].IsConnected() || !subs[i].IsConnected() {
				return false
			}
		}
		return true
	})
	sent, got := make([]int, streams), make([]int, streams)
	handlers := make([]logbuffer.FragmentHandler, streams)
	for i := range streams {
		handlers[i] = func(b []byte, _ *logbuffer.Header) {
			require.Equal(t, got[i], int(binary.LittleEndian.Uint64(b)), "stream %d out of order", i)
			got[i]++
		}
	}
	msg := make([]byte, 64)
	end := time.Now().Add(5 * deadline)
	for done := false; !done; {
		require.False(t, time.Now().After(end), "timed out: sent %v got %v", sent, got)
		done = true
		for i := range streams {
			if sent[i] < n {
				binary.LittleEndian.PutUint64(msg, uint64(sent[i]))
				if pubs[i].Offer(msg) > 0 {
					sent[i]++
				}
			}
			subs[i].Poll(handlers[i], 64)
			done = done && got[i] == n
		}
	}
	require.EqualValues(t, 1, m.RC.Connected.Load(), "one connection dialled for the 32 publications")
	require.EqualValues(t, 1, m.RC.Accepted.Load(), "one accepted")
	requireCleanRC(t, m)
	requireNoErrorLog(t, d)
}

// TestIBRCManyPeers (issue 29): one ib-qp=rc subscription takes more
// connections than the 16 it once capped them at: 48 publication
// transports (48 peers to it: each its own connection) each send a frame
// naming itself, every frame arrives from its own address, and the reply
// sent to that address reaches that publication alone. Each accepted
// connection has its own small send CQ; only the device's limits bound
// their number.
func TestIBRCManyPeers(t *testing.T) {
	vm := testutil.OneNode(t)
	m := ib.New()
	ep := netip.MustParseAddrPort(vm.IP + ":24598")
	u, err := uri.Parse("aeron:ib?endpoint=" + ep.String() + "|ib-qp=rc|mtu=1408")
	require.NoError(t, err)
	p := driver.TransportParams{MTU: 1408, SocketRcvbuf: 128 << 10}
	sub, err := m.Open(u, ep, netip.AddrPort{}, p, driver.AffinityReceiver)
	require.NoError(t, err)
	defer sub.Close()
	const peers = 48
	pubs := make([]driver.Transport, peers)
	for i := range pubs {
		pubs[i], err = m.Open(u, netip.AddrPortFrom(netip.IPv4Unspecified(), 0), ep, p, driver.AffinitySender)
		require.NoError(t, err, "publication %d", i)
		defer pubs[i].Close()
	}
	from := map[int]netip.AddrPort{}
	onSub := func(_ driver.Transport, buf []byte, f netip.AddrPort, _ int64) {
		from[int(binary.LittleEndian.Uint32(buf))] = f
	}
	frame := make([]byte, 64)
	waitUntil(t, "a frame from every publication", deadline, func() bool {
		for i, pub := range pubs {
			if _, ok := from[i]; ok {
				continue
			}
			binary.LittleEndian.PutUint32(frame, uint32(i))
			_, err := pub.Send(netip.AddrPort{}, [][]byte{frame})
			require.NoError(t, err)
		}
		for range 64 {
			_, err := sub.Recv(64, onSub)
			require.NoError(t, err)
		}
		return len(from) == peers
	})
	seen := map[netip.AddrPort]int{}
	for i, a := range from {
		j, dup := seen[a]
		require.False(t, dup, "publications %d and %d arrive from the same address %s", i, j, a)
		seen[a] = i
	}
	// a reply to each address reaches its publication alone
	got := make([]int, peers)
	for i := range pubs {
		binary.LittleEndian.PutUint32(frame, uint32(i))
		n, err := sub.Send(from[i], [][]byte{frame})
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}
	waitUntil(t, "every publication's reply", deadline, func() bool {
		all := true
		for i, pub := range pubs {
			_, err := pub.Recv(16, func(_ driver.Transport, buf []byte, _ netip.AddrPort, _ int64) {
				require.Equal(t, uint32(i), binary.LittleEndian.Uint32(buf), "publication %d got another's reply", i)
				got[i]++
			})
			require.NoError(t, err)
			all = all && got[i] > 0
		}
		return all
	})
	require.EqualValues(t, peers, m.RC.Accepted.Load())
	require.Zero(t, m.RC.Rejected.Load()+m.RC.Lost.Load()+m.SendErrors.Load()+m.RecvErrors.Load())
}
