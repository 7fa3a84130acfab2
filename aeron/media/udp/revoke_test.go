package udp_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/logbuffer"
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

// TestRejectIPCImage: a subscriber rejects an IPC image (REJECT_IMAGE of
// an IPC publication, aeron_ipc_publication_reject). Its clients get
// ON_PUBLICATION_ERROR (IMAGE_REJECTED, the reason, C's loopback source),
// every subscriber loses the image, the publication is not connected, and
// after the image liveness timeout the subscribers get it again and read
// what is published then. On ibgo's driver and, with AERON_C_BIN, aeronmd.
func TestRejectIPCImage(t *testing.T) {
	forEachDriver(t, func(t *testing.T, k driverKind) {
		ctx := context.Background()
		d := k.start(t, false)
		errs := make(chan cnc.PublicationError, 8)
		cl, err := client.Connect(ctx, client.Options{Dir: d.Dir(), IdleSleep: 100 * time.Microsecond,
			OnPublicationError: func(e cnc.PublicationError) { errs <- e }})
		require.NoError(t, err)
		t.Cleanup(func() { cl.Close() })
		var available, gone atomic.Int32
		sub, err := cl.AddSubscriptionWithHandlers(ctx, "aeron:ipc", 5,
			func(*client.Image) { available.Add(1) }, func(*client.Image) { gone.Add(1) })
		require.NoError(t, err)
		pub, err := cl.AddPublication(ctx, "aeron:ipc", 5)
		require.NoError(t, err)
		waitFor(t, "connected", func() bool { return pub.IsConnected() && sub.ImageCount() == 1 })
		img := sub.Images()[0]
		require.Equal(t, pub.RegistrationID(), img.CorrelationID())

		rejected := time.Now()
		require.NoError(t, img.Reject(ctx, "not this one"))
		select {
		case e := <-errs:
			require.Equal(t, pub.RegistrationID(), e.RegistrationID)
			require.EqualValues(t, -1, e.DestinationRegistrationID)
			require.Equal(t, pub.SessionID(), e.SessionID)
			require.EqualValues(t, 5, e.StreamID)
			require.EqualValues(t, -1, e.ReceiverID)
			require.EqualValues(t, cnc.ErrorCodeImageRejected, e.ErrorCode)
			require.Equal(t, "not this one", e.Message)
			require.Equal(t, "1.0.0.127:0", e.Source.String(), "C's INADDR_LOOPBACK without htonl")
		case <-time.After(deadline):
			t.Fatal("no ON_PUBLICATION_ERROR")
		}
		waitFor(t, "image unavailable", func() bool { return gone.Load() == 1 })
		require.False(t, pub.IsConnected())
		require.EqualValues(t, 1, sysCounter(t, cl, "Images rejected"))
		waitFor(t, "image available again", func() bool { return available.Load() == 2 && sub.ImageCount() == 1 })
		require.GreaterOrEqual(t, time.Since(rejected), lcImageLiveness, "not before the cool-down ended")
		offer(t, pub, 0, 10)
		var got int
		waitFor(t, "messages after the cool-down", func() bool {
			sub.Poll(func([]byte, *logbuffer.Header) { got++ }, 10)
			return got == 10
		})
	})
}
