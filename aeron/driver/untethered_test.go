package driver

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/logbuffer"
)

// TestUntetheredSubscription: an IPC subscription with tether=false that
// stops reading is set aside after the window-limit timeout (its image
// becomes unavailable), stops holding the publisher back once resting,
// and rejoins after the resting timeout at the fastest consumer's
// position. A tethered one in its place holds the publisher for good.
func TestUntetheredSubscription(t *testing.T) {
	for _, tether := range []bool{false, true} {
		cfg := DefaultConfig()
		cfg.Dir = filepath.Join(t.TempDir(), "aeron")
		cfg.IPCTermBufferLength = 64 << 10
		cfg.TimerInterval = 10 * time.Millisecond
		d, err := Start(cfg)
		require.NoError(t, err)
		defer d.Close()
		ctx := context.Background()
		cl, err := client.Connect(ctx, client.Options{Dir: d.Dir(), IdleSleep: 100 * time.Microsecond})
		require.NoError(t, err)
		defer cl.Close()

		var available, gone atomic.Int32
		var rejoined atomic.Int64
		slowChannel := "aeron:ipc?tether=false"
		if tether {
			slowChannel = "aeron:ipc?tether=true"
		}
		slow, err := cl.AddSubscriptionWithHandlers(ctx, slowChannel, 3,
			func(img *client.Image) {
				if available.Add(1) == 2 {
					rejoined.Store(img.JoinPosition())
				}
			},
			func(*client.Image) { gone.Add(1) })
		require.NoError(t, err)
		fast, err := cl.AddSubscription(ctx, "aeron:ipc", 3)
		require.NoError(t, err)
		pub, err := cl.AddPublication(ctx, "aeron:ipc?untethered-window-limit-timeout=100ms|untethered-resting-timeout=200ms", 3)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return slow.ImageCount() == 1 && fast.ImageCount() == 1 }, 10*time.Second, time.Millisecond)

		msg := make([]byte, 256)
		var sent int64
		read := 0
		fastPoll := func() { fast.Poll(func([]byte, *logbuffer.Header) { read++ }, 100) }
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
			require.LessOrEqual(t, sent*288, int64(window+288), "the tethered subscription holds the publisher")
			continue
		}
		run(30*time.Second, func() bool { return gone.Load() == 1 })
		require.EqualValues(t, 1, gone.Load(), "the untethered subscription was set aside")
		require.Zero(t, slow.ImageCount())
		run(30*time.Second, func() bool { return sent*288 > 3*window })
		require.Greater(t, sent*288, int64(3*window), "once resting it no longer holds the publisher back")
		run(30*time.Second, func() bool { return available.Load() == 2 })
		require.EqualValues(t, 2, available.Load(), "it rejoins after the resting timeout")
		require.Greater(t, rejoined.Load(), int64(window), "at the fastest consumer's position, not where it stopped")
		got := 0
		run(30*time.Second, func() bool {
			got += slow.Poll(func([]byte, *logbuffer.Header) {}, 100)
			return got > 0
		})
		require.Positive(t, got, "and reads again")
	}
}
