package udp_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
)

// TestPublicationRevoke: a publisher revokes its publication while the
// subscriber has not read what was sent (C 1.48's REMOVE_PUBLICATION with
// the revoke flag). The subscriber's image goes at once, not after the
// drain or the liveness timeout, and says the publication was revoked;
// the publisher's driver counts it (Publications Revoked) and, over UDP,
// the subscriber's driver too (Publication Images Revoked: the heartbeat's
// EOS|REVOKED flags). On ibgo's driver and, with AERON_C_BIN, aeronmd, and
// over UDP between the two both ways.
func TestPublicationRevoke(t *testing.T) {
	kinds := scenarioDrivers(t)
	for _, a := range kinds {
		for _, b := range append([]driverKind{{name: "ipc"}}, kinds...) {
			network := b.start != nil
			name := a.name + "/ipc"
			if network {
				name = a.name + " publisher, " + b.name + " subscriber, udp"
			}
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				pd, channel := a.start(t, false), "aeron:ipc"
				sd := pd
				if network {
					sd, channel = b.start(t, false), scenarioChannel(t)
				}
				pc, sc := connect(t, pd.Dir()), connect(t, sd.Dir())
				var gone atomic.Int32
				var revoked atomic.Bool
				sub, err := sc.AddSubscriptionWithHandlers(ctx, channel, 9, nil, func(img *client.Image) {
					revoked.Store(img.IsPublicationRevoked())
					gone.Add(1)
				})
				require.NoError(t, err)
				pub, err := pc.AddExclusivePublication(ctx, channel, 9)
				require.NoError(t, err)
				waitFor(t, "connected", func() bool { return pub.IsConnected() && sub.ImageCount() == 1 })
				img := sub.Images()[0]
				require.False(t, img.IsPublicationRevoked())
				offer(t, pub, 0, 100) // never read
				time.Sleep(200 * time.Millisecond)
				start := time.Now()
				require.NoError(t, pub.Revoke())
				waitFor(t, "image unavailable", func() bool { return gone.Load() == 1 })
				took := time.Since(start)
				require.Less(t, took, lcImageLiveness, "the image went at once, not at the liveness timeout")
				require.True(t, revoked.Load(), "the image says its publication was revoked")
				require.True(t, img.IsPublicationRevoked(), "and still says so once closed")
				// the C conductor counts at its next timer event, after its
				// sender already flagged the heartbeats
				waitFor(t, "Publications Revoked", func() bool { return sysCounter(t, pc, "Publications Revoked") == 1 })
				if network {
					require.EqualValues(t, 1, sysCounter(t, sc, "Publication Images Revoked"))
				}
				t.Logf("image unavailable %v after the revoke", took)
			})
		}
	}
}
