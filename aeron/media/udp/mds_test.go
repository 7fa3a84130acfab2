package udp_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/media/udp"
)

// TestMDSTwoDestinations: a manual multi-destination-cast publication
// sends every frame to two endpoints; one multi-destination subscription
// receives on both into one image, each path losing its own 5% of DATA:
// every message arrives once and in order (copies dropped by position,
// gaps of one path filled by the other or by NAK). Removing a destination
// keeps delivery through the other; a removed endpoint can be added again.
func TestMDSTwoDestinations(t *testing.T) {
	ctx := context.Background()
	sd, _ := startDriver(t, udp.Loss{ReceiveRate: 0.05, Seed: 5}, nil)
	sc := connect(t, sd.Dir())
	sub, err := sc.AddSubscription(ctx, "aeron:udp?control-mode=manual", 1001)
	require.NoError(t, err)
	var dests [2]string
	for i := range dests {
		dests[i] = "aeron:udp?endpoint=127.0.0.1:" + strconv.Itoa(freePort(t))
		require.NoError(t, sub.AddDestination(ctx, dests[i]))
	}
	// each destination has its rcv-local-sockaddr, linked to the
	// subscription's rcv-channel, as aeron_receive_destination_create
	// allocates (the subscription itself binds nothing)
	localAddrs := func() []string {
		var out []string
		for _, c := range countersOf(t, sd, cnc.TypeLocalSockAddr) {
			out = append(out, checkLocalSockaddr(t, c, "rcv-local-sockaddr", sub.ChannelStatusID()))
		}
		return out
	}
	require.ElementsMatch(t, []string{dests[0][len("aeron:udp?endpoint="):], dests[1][len("aeron:udp?endpoint="):]}, localAddrs())
	pd, _ := startDriver(t, udp.Loss{}, nil)
	pc := connect(t, pd.Dir())
	pub, err := pc.AddPublication(ctx, "aeron:udp?control-mode=manual", 1001)
	require.NoError(t, err)
	for _, d := range dests {
		require.NoError(t, pub.AddDestination(ctx, d))
	}
	waitFor(t, "publication connected", pub.IsConnected)
	waitFor(t, "image available", sub.IsConnected)
	subs := []*client.Subscription{sub}
	before := systemCounter(t, sd, "Bytes received")
	streamPaced(t, pub, subs, 2000, 100, 50)
	// 2000 frames of 160 bytes, less 5% per path: both paths delivered
	// when well over one path's worth arrived
	require.Greater(t, systemCounter(t, sd, "Bytes received")-before, int64(2000*160*3/2), "did both destinations deliver?")

	// the subscription leaves destination 0: destination 1 carries on
	require.NoError(t, sub.RemoveDestination(ctx, dests[0]))
	require.Equal(t, []string{dests[1][len("aeron:udp?endpoint="):]}, localAddrs(), "the removed destination's counter went with it")
	streamPaced(t, pub, subs, 500, 100, 50)

	// destination 0 again, and the publication stops sending to 1:
	// destination 0 alone carries on, into the same image
	require.NoError(t, sub.AddDestination(ctx, dests[0]))
	require.NoError(t, pub.RemoveDestination(ctx, dests[1]))
	streamPaced(t, pub, subs, 500, 100, 50)
	require.Equal(t, 1, sub.ImageCount(), "a new image appeared")

	var de *client.DriverError
	err = sub.AddDestination(ctx, dests[0])
	require.ErrorAs(t, err, &de)
	require.Contains(t, de.Message, "already added")
	err = sub.RemoveDestination(ctx, "aeron:udp?endpoint=127.0.0.1:1")
	require.ErrorAs(t, err, &de)
	require.Contains(t, de.Message, "unknown receive destination")
	err = sub.AddDestination(ctx, "aeron:udp?control-mode=manual")
	require.ErrorAs(t, err, &de)
	require.Contains(t, de.Message, "has no endpoint")
}

// TestMDSRefusals: manual control needs a multi-destination subscription,
// which takes no endpoint of its own.
func TestMDSRefusals(t *testing.T) {
	ctx := context.Background()
	sd, _ := startDriver(t, udp.Loss{}, nil)
	sc := connect(t, sd.Dir())
	var de *client.DriverError
	_, err := sc.AddSubscription(ctx, "aeron:udp?control-mode=manual|endpoint=127.0.0.1:"+strconv.Itoa(freePort(t)), 1001)
	require.ErrorAs(t, err, &de)
	require.Contains(t, de.Message, "takes its endpoints from receive destinations")
	plain, err := sc.AddSubscription(ctx, "aeron:udp?endpoint=127.0.0.1:"+strconv.Itoa(freePort(t)), 1001)
	require.NoError(t, err)
	err = plain.AddDestination(ctx, "aeron:udp?endpoint=127.0.0.1:"+strconv.Itoa(freePort(t)))
	require.ErrorAs(t, err, &de)
	require.Contains(t, de.Message, "does not allow manual control")
}
