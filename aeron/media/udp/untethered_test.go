package udp_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/media/udp"
)

// untetheredCase runs one slow subscription (it never polls until it is
// told to rejoin) next to a fast one, over a 64 KiB-term publication
// (32 KiB window). Tethered, the slow one holds the publisher to hold
// bytes past it for good (one publication window for a spy; for a
// network subscriber the receiver window the sender may be ahead of its
// status messages, plus the publication window). Untethered (timeouts 100 ms window limit, 200 ms
// resting), it is set aside (image unavailable), stops holding the
// publisher back once resting, rejoins (image available again) at a
// position past where it stopped, and reads again.
func untetheredCase(t *testing.T, pubChannel, fastChannel, slowChannel string, tether bool, hold int64) {
	d, _ := startDriver(t, udp.Loss{}, nil)
	cl := connect(t, d.Dir())
	ctx := context.Background()
	var available, gone atomic.Int32
	var rejoined atomic.Int64
	slow, err := cl.AddSubscriptionWithHandlers(ctx, slowChannel, 3,
		func(img *client.Image) {
			if available.Add(1) == 2 {
				rejoined.Store(img.JoinPosition())
			}
		},
		func(*client.Image) { gone.Add(1) })
	require.NoError(t, err)
	fast, err := cl.AddSubscription(ctx, fastChannel, 3)
	require.NoError(t, err)
	pub, err := cl.AddPublication(ctx, pubChannel, 3)
	require.NoError(t, err)
	waitFor(t, "images", func() bool { return pub.IsConnected() && slow.ImageCount() == 1 && fast.ImageCount() == 1 })

	msg := make([]byte, 256) // 288 bytes a frame
	var sent int64
	fastPoll := func() { fast.Poll(func([]byte, *logbuffer.Header) {}, 100) }
	run := func(d time.Duration, until func() bool) {
		end := time.Now().Add(d)
		for time.Now().Before(end) && (until == nil || !until()) {
			if pub.Offer(msg) > 0 {
				sent++
			} else {
				fastPoll()
				time.Sleep(50 * time.Microsecond)
			}
		}
	}
	const window = 32 << 10
	if tether {
		run(700*time.Millisecond, nil)
		require.Zero(t, gone.Load(), "a tethered subscription is never set aside")
		require.LessOrEqual(t, sent*288, hold+288, "the tethered subscription holds the publisher")
		return
	}
	run(30*time.Second, func() bool { return gone.Load() == 1 })
	require.EqualValues(t, 1, gone.Load(), "the untethered subscription was set aside")
	require.Zero(t, slow.ImageCount())
	run(30*time.Second, func() bool { return sent*288 > 2*hold })
	require.Greater(t, sent*288, 2*hold, "once resting it no longer holds the publisher back")
	run(30*time.Second, func() bool { return available.Load() == 2 })
	require.EqualValues(t, 2, available.Load(), "it rejoins after the resting timeout")
	require.Greater(t, rejoined.Load(), int64(window), "past where it stopped")
	got := 0
	run(30*time.Second, func() bool {
		got += slow.Poll(func([]byte, *logbuffer.Header) {}, 100)
		return got > 0
	})
	require.Positive(t, got, "and reads again")
}

const untetheredTimeouts = "|untethered-window-limit-timeout=100ms|untethered-resting-timeout=200ms"

// TestUntetheredNetworkSubscription: tether=false on an aeron:udp
// subscription sharing an image with a tethered one
// (aeron_publication_image_check_untethered_subscriptions); the timeouts
// come from the subscription channel.
func TestUntetheredNetworkSubscription(t *testing.T) {
	for _, tether := range []bool{false, true} {
		t.Run("tether="+strconv.FormatBool(tether), func(t *testing.T) {
			ep := "aeron:udp?endpoint=127.0.0.1:" + strconv.Itoa(freePort(t))
			untetheredCase(t, ep+"|term-length=64k", ep+untetheredTimeouts,
				ep+untetheredTimeouts+"|tether="+strconv.FormatBool(tether), tether, 64<<10)
		})
	}
}

// TestUntetheredSpy: tether=false on an aeron-spy: subscription next to a
// real (tethered) subscriber of the publication
// (aeron_network_publication_check_untethered_subscriptions); the timeouts
// come from the publication channel.
func TestUntetheredSpy(t *testing.T) {
	for _, tether := range []bool{false, true} {
		t.Run("tether="+strconv.FormatBool(tether), func(t *testing.T) {
			ep := "aeron:udp?endpoint=127.0.0.1:" + strconv.Itoa(freePort(t))
			untetheredCase(t, ep+"|term-length=64k"+untetheredTimeouts, ep,
				"aeron-spy:"+ep+"|tether="+strconv.FormatBool(tether), tether, 32<<10)
		})
	}
}
