//go:build linux

package ib_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/media/ib"
	"github.com/ibgo/ibgo/internal/testutil"
)

// The two-guest tests (go run ./hwtest/vm test -topo two): node 1
// publishes, node 2 subscribes, each guest with its own ibgo driver and
// rxe on eth0, across the qemu link. Node 2 tells node 1 over TCP when it
// is done, so neither side tears down early.

const twoNodeMessages = 20_000

// TestIBTwoNodeUnicast: UD unicast across the link, every message once
// and in order, no completion in error, empty error logs.
func TestIBTwoNodeUnicast(t *testing.T) {
	vm := testutil.TwoNodes(t)
	d, m := startIB(t, nil)
	c := connectTo(t, d)
	ctx := context.Background()
	if vm.Node == 2 {
		sub, err := c.AddSubscription(ctx, "aeron:ib?endpoint="+vm.IP+":24601|mtu=1024", 1001)
		require.NoError(t, err)
		start := time.Now()
		require.NoError(t, newReceiver(sub, 0).until(twoNodeMessages, 2*deadline))
		t.Logf("node 2: %d messages of 256 B in %v", twoNodeMessages, time.Since(start))
		requireClean(t, d, m)
		sendDone(t, vm.Peer, 24602, "done")
		return
	}
	ln := listenDone(t, vm.IP, 24602)
	pub, err := c.AddPublication(ctx, "aeron:ib?endpoint="+vm.Peer+":24601|mtu=1024", 1001)
	require.NoError(t, err)
	waitUntil(t, "the subscriber on node 2", deadline, pub.IsConnected)
	offerAll(t, pub, 0, twoNodeMessages, 2*deadline)
	requireLine(t, ln, "done")
	requireClean(t, d, m)
}

// TestIBTwoNodeMulticast: UD multicast with a subscriber on each guest
// (node 1's in a second driver beside the publisher's); fc=min,g:/2 waits
// for both, and both get every message once and in order.
func TestIBTwoNodeMulticast(t *testing.T) {
	vm := testutil.TwoNodes(t)
	ch := "aeron:ib?endpoint=239.1.8.1:24611|interface=" + vm.IP + "|mtu=1024"
	d, m := startIB(t, nil)
	c := connectTo(t, d)
	ctx := context.Background()
	if vm.Node == 2 {
		sub, err := c.AddSubscription(ctx, ch, 1001)
		require.NoError(t, err)
		require.NoError(t, newReceiver(sub, 0).until(twoNodeMessages, 2*deadline))
		requireCleanMedia(t, m)
		sendDone(t, vm.Peer, 24612, "done")
		return
	}
	ln := listenDone(t, vm.IP, 24612)
	sd, sm := startIB(t, nil)
	sub, err := connectTo(t, sd).AddSubscription(ctx, ch, 1001)
	require.NoError(t, err)
	pub, err := c.AddPublication(ctx, ch+"|fc=min,g:/2", 1001)
	require.NoError(t, err)
	waitUntil(t, "both subscribers (fc=min,g:/2)", deadline, pub.IsConnected)
	done := make(chan error, 1)
	go func() { done <- newReceiver(sub, 0).until(twoNodeMessages, 2*deadline) }()
	offerAll(t, pub, 0, twoNodeMessages, 2*deadline)
	require.NoError(t, <-done, "node 1's own subscriber")
	requireLine(t, ln, "done")
	for _, x := range []*ib.Media{m, sm} {
		requireCleanMedia(t, x)
	}
}

// TestIBTwoNodeNetemLoss: UD unicast with 5 % loss (tc netem) on both
// guests' egress, so DATA, status messages, NAKs and the CM's SIDR MADs
// all meet it: Aeron's NAKs and retransmits recover, every message arrives
// once and in order.
func TestIBTwoNodeNetemLoss(t *testing.T) {
	vm := testutil.TwoNodes(t)
	netem(t, vm.Netdev, "loss", "5%")
	d, m := startIB(t, nil)
	c := connectTo(t, d)
	ctx := context.Background()
	if vm.Node == 2 {
		sub, err := c.AddSubscription(ctx, "aeron:ib?endpoint="+vm.IP+":24621|mtu=1024", 1001)
		require.NoError(t, err)
		require.NoError(t, newReceiver(sub, 0).until(twoNodeMessages, 2*deadline))
		naks := systemCounter(t, d, "NAKs sent")
		t.Logf("node 2: NAKs sent %d", naks)
		require.Positive(t, naks, "the loss was repaired by NAKs")
		requireCleanMedia(t, m)
		sendDone(t, vm.Peer, 24622, "done")
		return
	}
	ln := listenDone(t, vm.IP, 24622)
	pub, err := c.AddPublication(ctx, "aeron:ib?endpoint="+vm.Peer+":24621|mtu=1024", 1001)
	require.NoError(t, err)
	waitUntil(t, "the subscriber on node 2", deadline, pub.IsConnected)
	offerAll(t, pub, 0, twoNodeMessages, 2*deadline)
	requireLine(t, ln, "done")
	rtx := systemCounter(t, d, "Retransmits sent")
	t.Logf("node 1: retransmits sent %d", rtx)
	require.Positive(t, rtx)
	requireCleanMedia(t, m)
}

// TestIBTwoNodeSubscriberRestart: node 2's subscriber driver is closed
// (no end of stream, its QP gone) while node 1 keeps publishing, then a
// new driver subscribes on the same endpoint. The publication's transport
// finds its subscription silent, resolves the new QP by SIDR, the new
// image joins, and delivery resumes: consecutive messages, none twice.
func TestIBTwoNodeSubscriberRestart(t *testing.T) {
	vm := testutil.TwoNodes(t)
	ch := "aeron:ib?endpoint=" + vm.IP + ":24631|mtu=1024"
	ctx := context.Background()
	const each = 5_000
	if vm.Node == 2 {
		d1, _ := startIB(t, nil)
		sub, err := connectTo(t, d1).AddSubscription(ctx, ch, 1001)
		require.NoError(t, err)
		r1 := newReceiver(sub, 0)
		require.NoError(t, r1.until(each, 2*deadline))
		require.NoError(t, d1.Close(), "the first subscriber driver goes")
		time.Sleep(time.Second)
		d2, m2 := startIB(t, nil)
		sub2, err := connectTo(t, d2).AddSubscription(ctx, ch, 1001)
		require.NoError(t, err)
		start := time.Now()
		r2 := newReceiver(sub2, -1)
		require.NoError(t, r2.until(each, 2*deadline), "after the restart")
		t.Logf("node 2: first driver got 0..%d; the restarted one joined at %d after %v and got %d more in order",
			r1.next-1, r2.first, time.Since(start), r2.count())
		require.GreaterOrEqual(t, r2.first, r1.next, "the new image joined after what the first one had")
		requireCleanMedia(t, m2)
		sendDone(t, vm.Peer, 24632, "done")
		return
	}
	ln := listenDone(t, vm.IP, 24632)
	d, m := startIB(t, nil)
	pub, err := connectTo(t, d).AddPublication(ctx, "aeron:ib?endpoint="+vm.Peer+":24631|mtu=1024", 1001)
	require.NoError(t, err)
	waitUntil(t, "the subscriber on node 2", deadline, pub.IsConnected)
	var finished atomic.Bool
	result := make(chan error, 1)
	go func() {
		line, err := awaitDone(ln, 2*deadline)
		if err == nil && line != "done" {
			err = errUnexpected(line)
		}
		finished.Store(true)
		result <- err
	}()
	msg := make([]byte, 256)
	for i := 0; !finished.Load(); {
		putSeq(msg, i)
		if pub.Offer(msg) > 0 {
			i++
		} else {
			time.Sleep(100 * time.Microsecond)
		}
	}
	require.NoError(t, <-result)
	t.Logf("node 1: re-resolved the subscription %d times", m.Reresolves.Load())
	require.Positive(t, m.Reresolves.Load(), "the publication resolved the restarted subscriber's QP")
}

// TestIBTwoNodePublisherKilled: node 1's publisher driver is closed (no
// end of stream) once node 2 has every message; node 2's image goes
// unavailable after its image liveness timeout.
func TestIBTwoNodePublisherKilled(t *testing.T) {
	vm := testutil.TwoNodes(t)
	const n, liveness = 5_000, 2 * time.Second
	ctx := context.Background()
	if vm.Node == 2 {
		d, _ := startIB(t, func(c *driver.Config) { c.ImageLivenessTimeout = liveness })
		sub, err := connectTo(t, d).AddSubscription(ctx, "aeron:ib?endpoint="+vm.IP+":24641|mtu=1024", 1001)
		require.NoError(t, err)
		require.NoError(t, newReceiver(sub, 0).until(n, 2*deadline))
		sendDone(t, vm.Peer, 24642, "done")
		start := time.Now()
		waitUntil(t, "the image to go after the liveness timeout", deadline, func() bool { return !sub.IsConnected() })
		el := time.Since(start)
		t.Logf("node 2: image unavailable %v after the publisher's driver was told to go (liveness %v)", el, liveness)
		require.GreaterOrEqual(t, el, liveness/2, "the image went by the liveness timeout, not an end of stream")
		return
	}
	ln := listenDone(t, vm.IP, 24642)
	d, _ := startIB(t, nil)
	pub, err := connectTo(t, d).AddPublication(ctx, "aeron:ib?endpoint="+vm.Peer+":24641|mtu=1024", 1001)
	require.NoError(t, err)
	waitUntil(t, "the subscriber on node 2", deadline, pub.IsConnected)
	offerAll(t, pub, 0, n, 2*deadline)
	requireLine(t, ln, "done")
	require.NoError(t, d.Close(), "the publisher's driver goes without an end of stream")
}

// TestIBTwoNodeMDCDynamic: multi-destination-cast across the link. Node 2's
// subscription names node 1's control address; its driver resolves that
// address by SIDR over the link (peers.go) to register, node 1's
// publication adds it as a destination from its status messages, and
// every message arrives once and in order.
func TestIBTwoNodeMDCDynamic(t *testing.T) {
	vm := testutil.TwoNodes(t)
	d, m := startIB(t, nil)
	c := connectTo(t, d)
	ctx := context.Background()
	control := net.JoinHostPort(vm.IP, "24650")
	if vm.Node == 2 {
		control = net.JoinHostPort(vm.Peer, "24650")
		sub, err := c.AddSubscription(ctx, "aeron:ib?endpoint="+vm.IP+":24651|control="+control, 1001)
		require.NoError(t, err)
		require.NoError(t, newReceiver(sub, 0).until(twoNodeMessages, 2*deadline))
		requireClean(t, d, m)
		sendDone(t, vm.Peer, 24652, "done")
		return
	}
	ln := listenDone(t, vm.IP, 24652)
	pub, err := c.AddPublication(ctx, "aeron:ib?control="+control+"|control-mode=dynamic", 1001)
	require.NoError(t, err)
	waitUntil(t, "node 2's subscription registering", 2*deadline, pub.IsConnected)
	offerAll(t, pub, 0, twoNodeMessages, 2*deadline)
	requireLine(t, ln, "done")
	requireClean(t, d, m)
}

// TestIBTwoNodeMDCManual: a control-mode=manual publication on node 1 with
// two destinations its client adds: a subscription in node 1's own driver
// and node 2's, whose address the driver resolves by SIDR across the link
// on first use. With fc=min both get every message once and in order; then
// node 2's destination is removed. As in Aeron's driver the sender applies
// a removal on its next duty cycle, after the client has its answer, so
// some of the next 200 messages may still reach node 2; none of the 200
// after those may. Ports 24653-24659.
func TestIBTwoNodeMDCManual(t *testing.T) {
	vm := testutil.TwoNodes(t)
	d, m := startIB(t, nil)
	c := connectTo(t, d)
	ctx := context.Background()
	remote := "aeron:ib?endpoint=" + net.JoinHostPort(vm.Peer, "24654")
	if vm.Node == 2 {
		sub, err := c.AddSubscription(ctx, "aeron:ib?endpoint="+net.JoinHostPort(vm.IP, "24654"), 1001)
		require.NoError(t, err)
		// Connected means the publication's setup reached this driver.
		// Node 1 offers only after this, or this image would join late
		// (at the position then, not at message 0).
		waitUntil(t, "node 1's publication", 2*deadline, sub.IsConnected)
		sendDone(t, vm.Peer, 24658, "ready")
		r := newReceiver(sub, 0)
		require.NoError(t, r.until(twoNodeMessages, 2*deadline))
		// The publisher removes this destination once both have every
		// message, then offers 200 more to node 1 alone: none may come.
		removed := listenDone(t, vm.IP, 24656)
		sendDone(t, vm.Peer, 24655, "done")
		requireLine(t, removed, "done")
		// Node 1 has sent both tails and its own subscription has them;
		// any that still came this way would arrive within this poll.
		for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
			if sub.Poll(r.fh, 256) == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		require.NoError(t, r.bad)
		require.LessOrEqual(t, r.count(), twoNodeMessages+200, "the removed destination kept receiving")
		t.Logf("node 2: %d of the 200 offered as the removal took effect", r.count()-twoNodeMessages)
		requireClean(t, d, m)
		sendDone(t, vm.Peer, 24659, "checked")
		return
	}
	ready, ln, checked := listenDone(t, vm.IP, 24658), listenDone(t, vm.IP, 24655), listenDone(t, vm.IP, 24659)
	pub, err := c.AddPublication(ctx, "aeron:ib?control-mode=manual|control="+net.JoinHostPort(vm.IP, "24653")+"|fc=min", 1001)
	require.NoError(t, err)
	local := "aeron:ib?endpoint=" + net.JoinHostPort(vm.IP, "24657")
	sub, err := c.AddSubscription(ctx, local, 1001)
	require.NoError(t, err)
	require.NoError(t, pub.AddDestination(ctx, local))
	require.NoError(t, pub.AddDestination(ctx, remote))
	r := newReceiver(sub, 0)
	waitUntil(t, "node 1's destination connected", 2*deadline, func() bool { return pub.IsConnected() && sub.IsConnected() })
	requireLine(t, ready, "ready")
	end := time.Now().Add(2 * deadline)
	msg := make([]byte, 256)
	for i := 0; r.count() < twoNodeMessages; {
		require.False(t, time.Now().After(end), "timed out: offered %d, node 1 received %d", i, r.count())
		if i < twoNodeMessages {
			putSeq(msg, i)
			if pub.Offer(msg) > 0 {
				i++
			}
		}
		sub.Poll(r.fh, 64)
		require.NoError(t, r.bad)
	}
	requireLine(t, ln, "done")
	require.NoError(t, pub.RemoveDestination(ctx, remote))
	// fc=min may keep counting node 2 until its receiver timeout (5 s);
	// 400 messages of 256 B fit the window meanwhile.
	offerAll(t, pub, twoNodeMessages, twoNodeMessages+200, deadline)
	require.NoError(t, r.until(twoNodeMessages+200, deadline))
	offerAll(t, pub, twoNodeMessages+200, twoNodeMessages+400, deadline)
	require.NoError(t, r.until(twoNodeMessages+400, deadline))
	sendDone(t, vm.Peer, 24656, "done")
	requireClean(t, d, m)
	requireLine(t, checked, "checked") // node 2 checked before this driver goes
}
