//go:build linux

package ib_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/testutil"
)

// TestIBTwoNodeWriteLinkDown (issue 31): ib-mode=write across the link
// between two guests, node 1 publishing into node 2's image. Node 1's
// link goes down for 2 s mid-stream: the connection is lost, its grant
// revoked (node 2 zeroes what a cut-short write may have left), node 1
// dials again once the link is back, asks for the grant again, and every
// message arrives once and in order.
func TestIBTwoNodeWriteLinkDown(t *testing.T) {
	vm := testutil.TwoNodes(t)
	const n = 60_000
	ctx := context.Background()
	if vm.Node == 2 {
		ch := "aeron:ib?endpoint=" + vm.IP + ":24751|ib-qp=rc|ib-mode=write|mtu=4096|term-length=64k"
		d, m := startIB(t, nil)
		sub, err := connectTo(t, d).AddSubscription(ctx, ch, 1001)
		require.NoError(t, err)
		r := newReceiver(sub, 0)
		err = r.until(n, 4*deadline)
		t.Logf("node 2: received %d; grants issued %d, revoked %d; frames placed %d, placements refused %d",
			r.count(), m.RC.GrantsIssued.Load(), m.RC.GrantsRevoked.Load(), m.RC.PlacedFrames.Load(), m.RC.BadPlacements.Load())
		require.NoError(t, err, "every message once and in order across the link outage")
		require.GreaterOrEqual(t, m.RC.GrantsIssued.Load(), int64(2), "granted again after the outage")
		require.GreaterOrEqual(t, m.RC.PlacedFrames.Load(), int64(n))
		sendDone(t, vm.Peer, 24752, "done")
		return
	}
	ln := listenDone(t, vm.IP, 24752)
	d, m := startIB(t, nil)
	pub, err := connectTo(t, d).AddPublication(ctx, "aeron:ib?endpoint="+vm.Peer+":24751|ib-qp=rc|ib-mode=write|mtu=4096|term-length=64k", 1001)
	require.NoError(t, err)
	waitUntil(t, "the subscriber on node 2", deadline, pub.IsConnected)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "set", vm.Netdev, "up").Run() })
	offerAll(t, pub, 0, n/3, deadline)
	out, err := exec.Command("ip", "link", "set", vm.Netdev, "down").CombinedOutput()
	require.NoError(t, err, "%s", out)
	up := time.AfterFunc(2*time.Second, func() { _ = exec.Command("ip", "link", "set", vm.Netdev, "up").Run() })
	defer up.Stop()
	offerAll(t, pub, n/3, n, 4*deadline)
	requireLine(t, ln, "done")
	t.Logf("node 1: writes %d, rewritten %d bytes, skipped %d, dropped %d; rc lost %d, connected %d",
		m.RC.Writes.Load(), m.RC.Rewritten.Load(), m.RC.WriteSkipped.Load(), m.RC.Dropped.Load(), m.RC.Lost.Load(), m.RC.Connected.Load())
	require.GreaterOrEqual(t, m.RC.Connected.Load(), int64(2), "the connection was made again")
}
