package udp_test

import (
	"context"
	"encoding/binary"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/media/udp"
)

// TestSpiesSeeWhatIsSent: aeron-spy: subscriptions in the publisher's
// driver, one added before the publication and one after, read every
// message the publication sends to a real subscriber in another driver,
// in order; closing the publication ends their images.
func TestSpiesSeeWhatIsSent(t *testing.T) {
	pd, _ := startDriver(t, udp.Loss{}, nil)
	sd, _ := startDriver(t, udp.Loss{}, nil)
	pc, sc := connect(t, pd.Dir()), connect(t, sd.Dir())
	channel := "aeron:udp?endpoint=127.0.0.1:" + strconv.Itoa(freePort(t))
	ctx := context.Background()
	early, err := pc.AddSubscription(ctx, "aeron-spy:"+channel, 1001)
	require.NoError(t, err)
	other, err := pc.AddSubscription(ctx, "aeron-spy:"+channel, 1002)
	require.NoError(t, err)
	sub, err := sc.AddSubscription(ctx, channel, 1001)
	require.NoError(t, err)
	pub, err := pc.AddPublication(ctx, channel, 1001)
	require.NoError(t, err)
	late, err := pc.AddSubscription(ctx, "aeron-spy:"+channel, 1001)
	require.NoError(t, err)
	waitFor(t, "publication connected", pub.IsConnected)
	waitFor(t, "image available", sub.IsConnected)
	waitFor(t, "spy images", func() bool { return early.ImageCount() == 1 && late.ImageCount() == 1 })
	require.Equal(t, "aeron:ipc", early.Images()[0].SourceIdentity(), "as the C driver names a spy's source")
	require.Equal(t, pub.SessionID(), early.Images()[0].SessionID())
	time.Sleep(20 * time.Millisecond)
	require.Zero(t, other.ImageCount(), "a spy of another stream sees nothing")

	const n = 1000
	type reader struct {
		s    *client.Subscription
		next int
	}
	readers := []*reader{{s: sub}, {s: early}, {s: late}}
	handler := func(r *reader) client.FragmentHandler {
		return func(payload []byte, _ *logbuffer.Header) {
			require.Equal(t, r.next, int(binary.LittleEndian.Uint64(payload)), "message out of order or duplicated")
			r.next++
		}
	}
	handlers := []client.FragmentHandler{handler(readers[0]), handler(readers[1]), handler(readers[2])}
	poll := func() {
		for i, r := range readers {
			r.s.Poll(handlers[i], 64)
		}
	}
	msg := make([]byte, 256)
	end := time.Now().Add(deadline)
	for i := 0; i < n; {
		binary.LittleEndian.PutUint64(msg, uint64(i))
		if pub.Offer(msg) > 0 {
			i++
		} else {
			poll()
			time.Sleep(10 * time.Microsecond)
		}
		require.False(t, time.Now().After(end), "timed out offering")
	}
	waitFor(t, "every message everywhere", func() bool {
		poll()
		return readers[0].next == n && readers[1].next == n && readers[2].next == n
	})
	require.NoError(t, pub.Close())
	waitFor(t, "spy images gone", func() bool { return early.ImageCount() == 0 && late.ImageCount() == 0 })
}
