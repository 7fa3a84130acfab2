package driver

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/logbuffer"
)

// TestSpiesSimulateConnection: with no receiver, a spy connects a network
// publication only when AERON_SPIES_SIMULATE_CONNECTION says so; then the
// spy alone holds the publisher back (publication window) and reads every
// message in order.
func TestSpiesSimulateConnection(t *testing.T) {
	ctx := context.Background()
	const channel = "aeron:udp?endpoint=127.0.0.1:40777|term-length=64k"
	for _, simulate := range []bool{false, true} {
		m := &fakeMedia{}
		cfg := udpTestConfig(t)
		cfg.SpiesSimulateConnection = simulate
		d, err := Start(cfg, WithMedia(m))
		require.NoError(t, err)
		defer d.Close()
		cl, err := client.Connect(ctx, client.Options{Dir: d.Dir(), IdleSleep: 100 * time.Microsecond})
		require.NoError(t, err)
		defer cl.Close()
		pub, err := cl.AddPublication(ctx, channel, 5)
		require.NoError(t, err)
		spy, err := cl.AddSubscription(ctx, "aeron-spy:"+channel, 5)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return spy.ImageCount() == 1 }, 10*time.Second, time.Millisecond)
		if !simulate {
			time.Sleep(50 * time.Millisecond)
			require.False(t, pub.IsConnected(), "a spy does not connect the publication by default")
			require.Equal(t, client.NotConnected, pub.Offer([]byte("x")))
			continue
		}
		require.Eventually(t, pub.IsConnected, 10*time.Second, time.Millisecond)
		msg := make([]byte, 256)
		sent := 0
		var pressedSince time.Time
		for {
			binary.LittleEndian.PutUint64(msg, uint64(sent))
			r := pub.Offer(msg)
			if r > 0 {
				sent++
				pressedSince = time.Time{}
				continue
			}
			require.Equal(t, client.BackPressured, r)
			if pressedSince.IsZero() {
				pressedSince = time.Now()
			} else if time.Since(pressedSince) > 200*time.Millisecond {
				break
			}
			time.Sleep(time.Millisecond)
		}
		// 64 KiB term: the publication window is 32 KiB past the spy.
		require.Positive(t, sent)
		require.LessOrEqual(t, sent*288, 32<<10+288, "the spy held the publisher back")
		next := 0
		require.Eventually(t, func() bool {
			spy.Poll(func(p []byte, _ *logbuffer.Header) {
				require.Equal(t, next, int(binary.LittleEndian.Uint64(p)))
				next++
			}, 100)
			return next == sent
		}, 10*time.Second, time.Millisecond)
		require.Eventually(t, func() bool { return pub.Offer(msg) > 0 }, 10*time.Second, time.Millisecond,
			"the spy's progress frees the publisher")
	}
}
