//go:build linux

package ib_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/media/ib"
	"github.com/ibgo/ibgo/aeron/uri"
	"github.com/ibgo/ibgo/internal/testutil"
)

// failPoll makes the next poll of m's first transport's CQ fail and waits
// for that transport's rebuild (the first of the test).
func failPoll(t *testing.T, m *capture, what string) {
	t.Helper()
	ib.FailNextPoll(m.transports()[0])
	waitUntil(t, what, deadline, func() bool { return m.CQRebuilds.Load() == 1 })
}

// requireOneUDRebuildEach: each side's UD endpoint failed and was rebuilt
// once, no completion failed, and the publisher posts from its registered
// log again (its zero-copy count passed zc, read before its failure).
func requireOneUDRebuildEach(t *testing.T, ms, mp *capture, zc int64) {
	t.Helper()
	for name, m := range map[string]*capture{"subscriber": ms, "publisher": mp} {
		require.EqualValues(t, 1, m.CQErrors.Load(), "%s: one CQ failure", name)
		require.EqualValues(t, 1, m.CQRebuilds.Load(), "%s: one rebuild", name)
		require.Zero(t, m.SendErrors.Load(), "%s: send completions in error (stale keys?)", name)
		require.Zero(t, m.RecvErrors.Load(), "%s: receive completions in error", name)
	}
	require.Greater(t, mp.ZeroCopy.Load(), zc, "the rebuilt publisher posts from its log again")
}

// TestIBCQFailureRecovered: mid-stream the poll of the subscriber's UD CQ
// fails (as a CQ in error after an overrun fails it), and later the
// publisher's. Each transport counts it, writes it to its driver's error
// log once with the cause, and rebuilds its endpoint with a new QP and CQ:
// the subscriber listens again (its publication notices the silence and
// resolves it again), the publisher resolves its subscription again and
// registers its log with the new endpoint (sends from it would fail with
// the old lkeys). Aeron's NAKs and retransmits repair what was lost: every
// message arrives once and in order, and TestMain's leak check finds
// nothing of the old endpoints left.
func TestIBCQFailureRecovered(t *testing.T) {
	vm := testutil.OneNode(t)
	p := startCapturedPair(t, "aeron:ib?endpoint="+vm.IP+":24601|mtu=1024")
	dp, mp, ds, ms := p.dp, p.mp, p.ds, p.ms
	var zc int64
	p.streamWithFaults(t,
		func(from, to int) { offerSized(t, p.pub, from, to, 512, 5*deadline) }, // 544-byte frames: posted from the registered log
		func() { failPoll(t, ms, "the subscriber's rebuild") },
		func() { zc = mp.ZeroCopy.Load(); failPoll(t, mp, "the publisher's rebuild") })

	requireOneUDRebuildEach(t, ms, mp, zc)
	require.Positive(t, mp.Reresolves.Load(), "the publisher resolved the rebuilt subscription again")
	for name, d := range map[string]*driver.Driver{"subscriber": ds, "publisher": dp} {
		log, k := errorLog(t, d)
		require.Equal(t, 1, k, "%s: one distinct error: %s", name, log)
		require.Contains(t, log, "ib: the CQ of UD endpoint ", name)
		require.Contains(t, log, "failed (poll: injected CQ failure (test hook))", name)
	}
	text, _ := errorLog(t, ds)
	require.Contains(t, text, vm.IP+":24601 failed", "the subscriber's log names its endpoint")
	require.Contains(t, text, "it listens again with a new QP and CQ")
	text, _ = errorLog(t, dp)
	require.Contains(t, text, "it resolves its subscription again with a new QP and CQ")
	t.Logf("subscriber: NAKs sent %d; publisher: retransmits sent %d, re-resolutions %d, zero-copy %d",
		systemCounter(t, ds, "NAKs sent"), systemCounter(t, dp, "Retransmits sent"), mp.Reresolves.Load(), mp.ZeroCopy.Load())
}

// TestIBRCCQFailureRecovered: the same over ib-qp=rc. The subscription's
// shared CQ fails first: it drops its connections, rebuilds the shared CQ
// and SRQ under a new generation, and its publication, disconnected, dials
// again onto the new ones. Then the publication's connection CQ fails: it
// drops the connection and dials again with a new QP and CQ. Every
// message arrives once and in order.
func TestIBRCCQFailureRecovered(t *testing.T) {
	vm := testutil.OneNode(t)
	p := startCapturedPair(t, "aeron:ib?endpoint="+vm.IP+":24603|ib-qp=rc|mtu=4096")
	dp, mp, ds, ms := p.dp, p.mp, p.ds, p.ms
	p.streamWithFaults(t,
		func(from, to int) { offerAll(t, p.pub, from, to, 5*deadline) },
		func() {
			failPoll(t, ms, "the subscriber's rebuild")
			waitUntil(t, "the publication's new connection", deadline, func() bool { return ms.RC.Accepted.Load() >= 2 })
		},
		func() { failPoll(t, mp, "the publisher's rebuild") })

	require.EqualValues(t, 1, ms.RC.CQErrors.Load(), "subscriber: one shared CQ failure")
	require.EqualValues(t, 1, ms.CQRebuilds.Load(), "subscriber: one rebuild")
	require.EqualValues(t, 1, mp.RC.CQErrors.Load(), "publisher: one connection CQ failure")
	require.EqualValues(t, 1, mp.CQRebuilds.Load(), "publisher: one rebuild")
	require.GreaterOrEqual(t, mp.RC.Connected.Load(), int64(3), "the publication dialled again after each failure")
	require.GreaterOrEqual(t, ms.RC.Accepted.Load(), int64(3), "and the rebuilt subscription accepted it")
	for name, m := range map[string]*capture{"subscriber": ms, "publisher": mp} {
		require.Zero(t, m.SendErrors.Load(), "%s: send completions in error", name)
		require.Zero(t, m.RecvErrors.Load(), "%s: receive completions in error", name)
	}
	text, _ := errorLog(t, ds)
	require.Contains(t, text, "ib: rc poll the shared CQ of "+vm.IP+":24603 failed: injected CQ failure (test hook); its connections are dropped and its shared CQ and receive queue rebuilt", "subscriber log:\n%s", text)
	text, _ = errorLog(t, dp)
	require.Contains(t, text, "lost: poll its CQ: injected CQ failure (test hook)", "publisher log:\n%s", text)
	require.Contains(t, text, vm.IP+":24603 lost", "the publisher's log names the lost connection's peer:\n%s", text)
	t.Logf("subscriber: NAKs sent %d, connections lost %d; publisher: connected %d, lost %d, frames dropped %d",
		systemCounter(t, ds, "NAKs sent"), ms.RC.Lost.Load(), mp.RC.Connected.Load(), mp.RC.Lost.Load(), mp.RC.Dropped.Load())
}

// TestIBMulticastCQFailureRecovered: the same on a UD multicast channel:
// the subscriber's CQ fails, then the publisher's; each leaves its groups,
// opens a new endpoint on the interface and joins them again, and every
// message arrives once and in order.
func TestIBMulticastCQFailureRecovered(t *testing.T) {
	vm := testutil.OneNode(t)
	p := startCapturedPair(t, "aeron:ib?endpoint=239.1.7.7:24605|interface="+vm.IP+"|mtu=1024")
	dp, mp, ds, ms := p.dp, p.mp, p.ds, p.ms
	var zc int64
	p.streamWithFaults(t,
		func(from, to int) { offerSized(t, p.pub, from, to, 512, 5*deadline) },
		func() { failPoll(t, ms, "the subscriber's rebuild") },
		func() { zc = mp.ZeroCopy.Load(); failPoll(t, mp, "the publisher's rebuild") })

	requireOneUDRebuildEach(t, ms, mp, zc)
	for name, d := range map[string]*driver.Driver{"subscriber": ds, "publisher": dp} {
		log, k := errorLog(t, d)
		require.Equal(t, 1, k, "%s: one distinct error: %s", name, log)
		require.Contains(t, log, "failed (poll: injected CQ failure (test hook)); it joins its groups again with a new QP and CQ", name)
	}
	text, _ := errorLog(t, ds)
	require.Contains(t, text, "ib: the CQ of UD endpoint 239.1.7.7:24605 on "+vm.IP+" failed")
	t.Logf("subscriber: NAKs sent %d; publisher: retransmits sent %d", systemCounter(t, ds, "NAKs sent"), systemCounter(t, dp, "Retransmits sent"))
}

// TestIBRCRepeatedSharedCQFailures: two publishing drivers on one ib-qp=rc
// subscription endpoint; its shared CQ fails five times while they stream,
// some failures landing while the publications are still dialling back
// (a connection accepted on queues rebuilt meanwhile is dropped, and the
// old queues are destroyed once no QP uses them). Both streams arrive
// whole and in order, and TestMain's leak check finds no queue left.
func TestIBRCRepeatedSharedCQFailures(t *testing.T) {
	vm := testutil.OneNode(t)
	ds, ms := startCapture(t)
	ch := "aeron:ib?endpoint=" + vm.IP + ":24607|ib-qp=rc|mtu=4096"
	ctx := context.Background()
	cs := connectTo(t, ds)
	const n, failures = 20_000, 5
	var pubs [2]*client.Publication
	var rs [2]*receiver
	dones := make(chan error, 2)
	for i := range pubs {
		sub, err := cs.AddSubscription(ctx, ch, int32(1001+i))
		require.NoError(t, err)
		dp, _ := startCapture(t)
		pubs[i], err = connectTo(t, dp).AddPublication(ctx, ch, int32(1001+i))
		require.NoError(t, err)
		waitUntil(t, "connected", deadline, func() bool { return pubs[i].IsConnected() && sub.IsConnected() })
		rs[i] = newReceiver(sub, 0)
	}
	require.Len(t, ms.transports(), 1)
	for i := range rs {
		go func() { dones <- rs[i].until(n, 5*deadline) }()
	}
	// The failures are injected beside the offers (no require off the
	// test's goroutine: the injector reports through injected).
	injected := make(chan error, 1)
	go func() {
		for k := 1; k <= failures; k++ {
			time.Sleep(time.Duration(k*37) * time.Millisecond)
			ib.FailNextPoll(ms.transports()[0])
			end := time.Now().Add(deadline)
			for ms.CQRebuilds.Load() != int64(k) {
				if time.Now().After(end) {
					injected <- fmt.Errorf("rebuild %d never happened", k)
					return
				}
				time.Sleep(time.Millisecond)
			}
		}
		injected <- nil
	}()
	for from := 0; from < n; from += n / 10 {
		offerAll(t, pubs[0], from, from+n/10, 5*deadline)
		offerAll(t, pubs[1], from, from+n/10, 5*deadline)
	}
	require.NoError(t, <-injected)
	require.NoError(t, <-dones)
	require.NoError(t, <-dones)
	require.EqualValues(t, failures, ms.RC.CQErrors.Load())
	require.EqualValues(t, failures, ms.CQRebuilds.Load())
	require.Zero(t, ms.SendErrors.Load()+ms.RecvErrors.Load(), "completions in error")
	log, _ := errorLog(t, ds)
	require.Contains(t, log, "ib: rc poll the shared CQ of "+vm.IP+":24607 failed: injected CQ failure (test hook)")
	t.Logf("subscriber: accepted %d, lost %d, NAKs sent %d", ms.RC.Accepted.Load(), ms.RC.Lost.Load(), systemCounter(t, ds, "NAKs sent"))
}

// TestIBRCSharedCQOverrun: a real overrun, no test hook in the poll path.
// The subscription's shared CQ is made too small (UndersizeNextSharedCQ)
// and a burst arrives while nobody polls it: rxe raises CQ_ERR on the
// device context (and puts the responder's QP in error) but its poll never
// fails, so only the medium's async-event reader can notice. The next
// Recv fails with the event as cause, the shared queues are rebuilt at
// their normal size, the publication dials again, and frames flow.
func TestIBRCSharedCQOverrun(t *testing.T) {
	vm := testutil.OneNode(t)
	m := ib.New()
	var mu sync.Mutex
	var logged []string
	m.SetErrorHandler(func(err error) {
		mu.Lock()
		logged = append(logged, err.Error())
		mu.Unlock()
	})
	ep := netip.MustParseAddrPort(vm.IP + ":24630")
	u, err := uri.Parse("aeron:ib?endpoint=" + ep.String() + "|ib-qp=rc|mtu=4096")
	require.NoError(t, err)
	p := driver.TransportParams{MTU: 4096, SocketRcvbuf: 128 << 10}
	ib.UndersizeNextSharedCQ(4)
	sub, err := m.Open(u, ep, netip.AddrPort{}, p, driver.AffinityReceiver)
	require.NoError(t, err)
	defer sub.Close()
	pub, err := m.Open(u, netip.AddrPortFrom(netip.IPv4Unspecified(), 0), ep, p, driver.AffinitySender)
	require.NoError(t, err)
	defer pub.Close()

	frame := make([]byte, 1024)
	got := 0
	onSub := func(driver.Transport, []byte, netip.AddrPort, int64) { got++ }
	nop := func(driver.Transport, []byte, netip.AddrPort, int64) {}
	for i := 0; i < 64; i++ {
		_, err := pub.Send(netip.AddrPort{}, [][]byte{frame})
		require.NoError(t, err)
		_, _ = pub.Recv(16, nop)
	}
	waitUntil(t, "the device's CQ_ERR event", deadline, func() bool {
		_, _ = pub.Recv(16, nop)
		return m.AsyncEvents.Load() > 0
	})
	_, err = sub.Recv(16, onSub)
	require.ErrorContains(t, err, "asynchronous event CQ_ERR", "the subscription's poll fails with the event")
	require.EqualValues(t, 1, m.RC.CQErrors.Load())

	waitUntil(t, "frames after the rebuild", deadline, func() bool {
		before := got
		_, _ = pub.Send(netip.AddrPort{}, [][]byte{frame})
		_, _ = pub.Recv(16, nop)
		_, _ = sub.Recv(16, onSub)
		return got > before && m.CQRebuilds.Load() == 1
	})
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, logged)
	require.Contains(t, strings.Join(logged, "\n"), "asynchronous event CQ_ERR")
	t.Logf("async events %d; error log:\n%s", m.AsyncEvents.Load(), strings.Join(logged, "\n"))
}
