package udp_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/media/udp"
)

// mdcSubscribers starts two subscriber drivers, each subscribed on its own
// unicast endpoint with extra appended (control= for dynamic MDC).
func mdcSubscribers(t *testing.T, extra string, loss float64) ([2]*client.Subscription, [2]string) {
	var subs [2]*client.Subscription
	var eps [2]string
	for i := range subs {
		sd, _ := startDriver(t, udp.Loss{ReceiveRate: loss, Seed: uint64(21 + i)}, nil)
		sc := connect(t, sd.Dir())
		eps[i] = "127.0.0.1:" + strconv.Itoa(freePort(t))
		sub, err := sc.AddSubscription(context.Background(), "aeron:udp?endpoint="+eps[i]+extra, 1001)
		require.NoError(t, err)
		subs[i] = sub
	}
	return subs, eps
}

// TestMDCManualTwoSubscribers: a control-mode=manual publication sends
// every frame to each destination a client added; after one is removed,
// only the other gets what follows.
func TestMDCManualTwoSubscribers(t *testing.T) {
	subs, eps := mdcSubscribers(t, "", 0)
	pd, _ := startDriver(t, udp.Loss{}, nil)
	pc := connect(t, pd.Dir())
	ctx := context.Background()
	pub, err := pc.AddPublication(ctx, "aeron:udp?control-mode=manual", 1001)
	require.NoError(t, err)
	require.False(t, pub.IsConnected())
	for _, ep := range eps {
		require.NoError(t, pub.AddDestination(ctx, "aeron:udp?endpoint="+ep))
	}
	waitFor(t, "publication connected", pub.IsConnected)
	for i := range subs {
		waitFor(t, "image available in subscriber "+strconv.Itoa(i), subs[i].IsConnected)
	}
	streamPaced(t, pub, subs[:], 400, 100, 50)

	require.NoError(t, pub.RemoveDestination(ctx, "aeron:udp?endpoint="+eps[1]))
	// Destination commands reach the sender through its command queue;
	// the removal has taken effect once sub 1 stops advancing while
	// sub 0 still receives, which the next stream checks.
	got1 := 0
	count := func(payload []byte, _ *logbuffer.Header) { got1++ }
	time.Sleep(50 * time.Millisecond)
	subs[1].Poll(count, 1000)
	got1 = 0
	streamPaced(t, pub, subs[:1], 200, 100, 50)
	time.Sleep(100 * time.Millisecond)
	subs[1].Poll(count, 1000)
	require.Zero(t, got1, "a removed destination still received data")

	// Unknown destinations and bad channels are refused clearly.
	var de *client.DriverError
	err = pub.AddDestination(ctx, "aeron:udp?control-mode=manual")
	require.ErrorAs(t, err, &de)
	require.Contains(t, de.Message, "has no endpoint")
}

// TestMDCDynamicTwoSubscribers: a control-mode=dynamic publication learns
// its destinations from the status messages of subscriptions naming its
// control address, with 5% receive loss at each: both NAK and recover
// independently; fc=min holds the publisher to the slower.
func TestMDCDynamicTwoSubscribers(t *testing.T) {
	control := "127.0.0.1:" + strconv.Itoa(freePort(t))
	subs, _ := mdcSubscribers(t, "|control="+control+"|control-mode=dynamic", 0.05)
	pd, _ := startDriver(t, udp.Loss{}, nil)
	pc := connect(t, pd.Dir())
	pub, err := pc.AddPublication(context.Background(), "aeron:udp?control="+control+"|control-mode=dynamic|fc=min", 1001)
	require.NoError(t, err)
	waitFor(t, "publication connected", pub.IsConnected)
	for i := range subs {
		waitFor(t, "image available in subscriber "+strconv.Itoa(i), subs[i].IsConnected)
	}
	streamTo(t, pub, subs[:], 2000, 200)
	require.Positive(t, systemCounter(t, pd, "NAKs received"))
}
