package udp_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/media/udp"
)

// TestLoopbackInEveryThreadingMode streams over real loopback sockets with
// 5 % receive loss between two drivers in each threading mode, so that the
// command queues between conductor, sender and receiver (and the direct
// calls of SHARED mode) carry every publication, endpoint, image and NAK.
func TestLoopbackInEveryThreadingMode(t *testing.T) {
	for _, mode := range []driver.ThreadingMode{driver.Dedicated, driver.SharedNetwork, driver.Shared} {
		t.Run(string(mode), func(t *testing.T) {
			set := func(c *driver.Config) {
				c.ThreadingMode = mode
				c.SharedIdle, c.SharedNetworkIdle = "sleep-ns,100000", "sleep-ns,100000"
			}
			pd, _ := startDriver(t, udp.Loss{}, set)
			sd, sm := startDriver(t, udp.Loss{ReceiveRate: 0.05, Seed: 7}, set)
			pc, sc := connect(t, pd.Dir()), connect(t, sd.Dir())
			channel := "aeron:udp?endpoint=127.0.0.1:" + strconv.Itoa(freePort(t))
			ctx := context.Background()
			sub, err := sc.AddSubscription(ctx, channel, 1001)
			require.NoError(t, err)
			pub, err := pc.AddPublication(ctx, channel, 1001)
			require.NoError(t, err)
			waitFor(t, "publication connected", pub.IsConnected)
			waitFor(t, "image available", sub.IsConnected)
			p := &pair{pubDriver: pd, subDriver: sd, subMedia: sm, pub: pub, sub: sub, channel: channel}
			p.stream(t, 1500, 256)
			require.Positive(t, sm.Dropped.Load(), "the loss generator dropped data")
			require.Positive(t, systemCounter(t, sd, "NAKs sent"), "the receiver NAKed the gaps")
			require.Positive(t, systemCounter(t, pd, "Retransmits sent"), "the sender retransmitted")

			// Closing the publication ends the image through the EOS
			// the sender sends and the conductor's lifecycle.
			require.NoError(t, pub.Close())
			waitFor(t, "image unavailable", func() bool { return !sub.IsConnected() })
		})
	}
}
