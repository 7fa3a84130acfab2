//go:build linux

package ib_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/internal/testutil"
)

// TestIBMDCDynamic: multi-destination-cast over aeron:ib UD with
// control-mode=dynamic: two subscriptions on their own endpoints name the
// publication's control address; their status messages reach it there,
// it sends every frame to both, and each receives every message once and
// in order.
func TestIBMDCDynamic(t *testing.T) {
	vm := testutil.OneNode(t)
	d, m := startIB(t, nil)
	c := connectTo(t, d)
	ctx := context.Background()
	control := fmt.Sprintf("%s:24610", vm.IP)
	var rs []*receiver
	for _, port := range []int{24611, 24612} {
		sub, err := c.AddSubscription(ctx, fmt.Sprintf("aeron:ib?endpoint=%s:%d|control=%s", vm.IP, port, control), 1001)
		require.NoError(t, err)
		rs = append(rs, newReceiver(sub, 0))
	}
	pub, err := c.AddPublication(ctx, "aeron:ib?control="+control+"|control-mode=dynamic|fc=min", 1001)
	require.NoError(t, err)
	waitUntil(t, "both subscriptions connected", deadline, func() bool {
		return pub.IsConnected() && rs[0].sub.IsConnected() && rs[1].sub.IsConnected()
	})
	pump(t, pub, rs, 2000)
	requireCleanMedia(t, m)
	text, entries := errorLog(t, d)
	require.Zero(t, entries, "error log:\n%s", text)
}

// TestIBMDCManual: a control-mode=manual publication over aeron:ib UD
// sends to the destinations its client adds (each resolved by SIDR on
// first use) and each plain unicast subscription receives every message
// once and in order; a removed destination receives no more.
func TestIBMDCManual(t *testing.T) {
	vm := testutil.OneNode(t)
	for i, pubCh := range []string{
		fmt.Sprintf("aeron:ib?control-mode=manual|control=%s:24620", vm.IP),
		// the default (max) flow control lets the slower destination fall
		// behind; 2,000 messages fit one 1 MiB term, so its NAKs are
		// always answered. min waits for the slower one.
		fmt.Sprintf("aeron:ib?control-mode=manual|control=%s:24621|fc=min", vm.IP),
	} {
		t.Run(pubCh, func(t *testing.T) {
			d, m := startIB(t, nil)
			c := connectTo(t, d)
			ctx := context.Background()
			pub, err := c.AddPublication(ctx, pubCh, 1002)
			require.NoError(t, err)
			var rs []*receiver
			var dests []string
			for _, port := range []int{24622 + 2*i, 24623 + 2*i} {
				ep := fmt.Sprintf("aeron:ib?endpoint=%s:%d", vm.IP, port)
				sub, err := c.AddSubscription(ctx, ep, 1002)
				require.NoError(t, err)
				require.NoError(t, pub.AddDestination(ctx, ep))
				rs = append(rs, newReceiver(sub, 0))
				dests = append(dests, ep)
			}
			waitUntil(t, "both subscriptions connected", deadline, func() bool {
				return pub.IsConnected() && rs[0].sub.IsConnected() && rs[1].sub.IsConnected()
			})
			const n = 2000
			pump(t, pub, rs, n)
			msg := make([]byte, 256)
			end := time.Now().Add(deadline)
			require.NoError(t, pub.RemoveDestination(ctx, dests[1]))
			for i := n; i < n+200; {
				putSeq(msg, i)
				if pub.Offer(msg) > 0 {
					i++
				}
				rs[0].sub.Poll(rs[0].fh, 64)
				require.False(t, time.Now().After(end), "timed out after the removal")
			}
			require.NoError(t, rs[0].until(n+200, deadline))
			rs[1].sub.Poll(rs[1].fh, 1000)
			require.NoError(t, rs[1].bad)
			require.Less(t, rs[1].count(), n+200, "the removed destination kept receiving")
			requireCleanMedia(t, m)
			text, entries := errorLog(t, d)
			require.Zero(t, entries, "error log:\n%s", text)
		})
	}
}

// TestIBMDCManualNeedsControl: without control= a manual publication has
// no local IP to put its queue pair on; the add fails naming the rule.
func TestIBMDCManualNeedsControl(t *testing.T) {
	testutil.OneNode(t)
	d, _ := startIB(t, nil)
	c := connectTo(t, d)
	_, err := c.AddPublication(context.Background(), "aeron:ib?control-mode=manual", 1003)
	require.ErrorContains(t, err, "INVALID_CHANNEL")
	require.ErrorContains(t, err, "aeron:ib needs a specific local IP")
	require.ErrorContains(t, err, "control=")
}

// pump offers messages 0..n-1 on pub while polling every receiver, until
// each has all n in order.
func pump(t *testing.T, pub *client.Publication, rs []*receiver, n int) {
	msg := make([]byte, 256)
	end := time.Now().Add(deadline)
	done := func() bool {
		for _, r := range rs {
			if r.count() < n {
				return false
			}
		}
		return true
	}
	for i := 0; !done(); {
		require.False(t, time.Now().After(end), "timed out: offered %d, received %d and %d", i, rs[0].count(), rs[1].count())
		if i < n {
			putSeq(msg, i)
			if pub.Offer(msg) > 0 {
				i++
			}
		}
		for j, r := range rs {
			r.sub.Poll(r.fh, 64)
			require.NoError(t, r.bad, "subscription %d", j)
		}
	}
}
