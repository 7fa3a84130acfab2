//go:build linux

package ib_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/media/ib"
	"github.com/ibgo/ibgo/internal/testutil"
)

// TestIBMulticastTwoSubscribers: in one guest, a publication on a UD
// multicast group and two subscriptions, one in the publisher's driver and
// one in a second driver (two receive endpoints, two QPs attached to the
// data group; the publication's QP attached to the control group receives
// both receivers' status messages). With fc=min,g:/2 both receive every
// message once and in order, and the error logs stay empty. A multicast
// channel with ib-qp=rc, or without interface=, is refused naming the rule.
func TestIBMulticastTwoSubscribers(t *testing.T) {
	vm := testutil.OneNode(t)
	da, ma := startIB(t, nil)
	db, mb := startIB(t, nil)
	ca, cb := connectTo(t, da), connectTo(t, db)
	ch := "aeron:ib?endpoint=239.1.7.1:24581|interface=" + vm.IP + "|mtu=1024"
	ctx := context.Background()
	s1, err := ca.AddSubscription(ctx, ch, 1001)
	require.NoError(t, err)
	s2, err := cb.AddSubscription(ctx, ch, 1001)
	require.NoError(t, err)
	pub, err := ca.AddPublication(ctx, ch+"|fc=min,g:/2", 1001)
	require.NoError(t, err)
	waitUntil(t, "both subscribers (fc=min,g:/2)", deadline, pub.IsConnected)
	waitUntil(t, "both images", deadline, func() bool { return s1.IsConnected() && s2.IsConnected() })

	const n = 20_000
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, s := range []*receiver{newReceiver(s1, 0), newReceiver(s2, 0)} {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = s.until(n, 5*deadline) }()
	}
	start := time.Now()
	offerAll(t, pub, 0, n, 5*deadline)
	wg.Wait()
	require.NoError(t, errs[0], "the subscriber in the publisher's driver")
	require.NoError(t, errs[1], "the subscriber in the second driver")
	t.Logf("%d messages of 256 B to two multicast subscribers in %v", n, time.Since(start))
	for _, m := range []*ib.Media{ma, mb} {
		requireCleanMedia(t, m)
		// the multicast QPs send inline (as the unicast ones): the second
		// driver only sends status messages, all small enough
		require.Positive(t, m.Inline.Load(), "datagrams sent inline on the multicast QPs")
	}
	for _, d := range []*driver.Driver{da, db} {
		log, k := errorLog(t, d)
		require.Zero(t, k, "error log: %s", log)
	}

	_, err = ca.AddPublication(ctx, "aeron:ib?endpoint=239.1.7.3:24583|interface="+vm.IP+"|ib-qp=rc", 1001)
	require.ErrorContains(t, err, "needs ib-qp=ud")
	_, err = ca.AddSubscription(ctx, "aeron:ib?endpoint=239.1.7.5:24585", 1001)
	require.ErrorContains(t, err, "needs interface=<local IP of the RDMA device>")
}
