package udp_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/logbuffer"
)

// TestTags: tags=channelTag,entityTag as the C driver 1.48 has them, on
// ibgo's driver and, with AERON_C_BIN, aeronmd, with the same outcomes and
// C's refusals:
//   - a channel naming only a send endpoint's tag publishes through that
//     endpoint, and its stream arrives;
//   - a channel naming only a receive endpoint's tag subscribes on it;
//   - aeron-spy: with the tag reads the tagged endpoint's publication;
//   - session-id=tag:<entityTag> takes the tagged publication's session
//     and term length;
//   - a tag with other addresses or another control mode is refused, as is
//     a tag that names nothing on a channel without an address.
func TestTags(t *testing.T) {
	forEachDriver(t, func(t *testing.T, k driverKind) {
		ctx := context.Background()
		d := k.start(t, false)
		cl, err := client.Connect(ctx, client.Options{Dir: d.Dir(), IdleSleep: 100 * time.Microsecond, OnError: func(error) {}})
		require.NoError(t, err)
		t.Cleanup(func() { cl.Close() })
		ep := "127.0.0.1:" + strconv.Itoa(freePort(t))
		other := "127.0.0.1:" + strconv.Itoa(freePort(t))

		// receive side: the endpoint, then a second stream by tag alone
		sub1, err := cl.AddSubscription(ctx, "aeron:udp?endpoint="+ep+"|tags=3003", 1)
		require.NoError(t, err)
		sub2, err := cl.AddSubscription(ctx, "aeron:udp?tags=3003", 2)
		require.NoError(t, err)
		require.Equal(t, sub1.ChannelStatusID(), sub2.ChannelStatusID(), "one receive endpoint")
		_, err = cl.AddSubscription(ctx, "aeron:udp?endpoint="+other+"|tags=3003", 3)
		require.ErrorContains(t, err, "matching tag 3003 has mismatched endpoint or control")

		// send side: the endpoint, then a second stream by tag alone
		pub1, err := cl.AddPublication(ctx, "aeron:udp?endpoint="+ep+"|tags=1001", 1)
		require.NoError(t, err)
		pub2, err := cl.AddPublication(ctx, "aeron:udp?tags=1001", 2)
		require.NoError(t, err)
		require.Equal(t, pub1.ChannelStatusID(), pub2.ChannelStatusID(), "one send endpoint")
		_, err = cl.AddPublication(ctx, "aeron:udp?endpoint="+other+"|tags=1001", 3)
		require.ErrorContains(t, err, "matching tag 1001 has mismatched endpoint or control")
		_, err = cl.AddPublication(ctx, "aeron:udp?control-mode=manual|tags=1001", 3)
		require.ErrorContains(t, err, "matching tag 1001 has mismatched control-mode")
		_, err = cl.AddPublication(ctx, "aeron:udp?tags=2002", 3)
		require.ErrorContains(t, err, "URI must have explicit control, endpoint, or be manual control-mode")

		spy, err := cl.AddSubscription(ctx, "aeron-spy:aeron:udp?tags=1001", 2)
		require.NoError(t, err)
		waitFor(t, "both streams connected, the spy too", func() bool {
			return pub1.IsConnected() && pub2.IsConnected() && sub1.ImageCount() == 1 && sub2.ImageCount() == 1 && spy.ImageCount() == 1
		})
		require.Equal(t, pub2.SessionID(), spy.Images()[0].SessionID())
		offer(t, pub2, 0, 20)
		for _, s := range []*client.Subscription{sub2, spy} {
			n := 0
			waitFor(t, "stream 2 through the tagged endpoints", func() bool {
				s.Poll(func([]byte, *logbuffer.Header) { n++ }, 10)
				return n == 20
			})
		}

		// entity tag
		tagged, err := cl.AddExclusivePublication(ctx, "aeron:udp?endpoint="+other+"|tags=,77|term-length=128k", 5)
		require.NoError(t, err)
		third := "127.0.0.1:" + strconv.Itoa(freePort(t))
		same, err := cl.AddExclusivePublication(ctx, "aeron:udp?endpoint="+third+"|session-id=tag:77", 5)
		require.NoError(t, err)
		require.Equal(t, tagged.SessionID(), same.SessionID(), "session-id=tag:77 takes the tagged publication's session")
		require.Equal(t, 128<<10, same.TermBufferLength(), "and its term length")
		_, err = cl.AddExclusivePublication(ctx, "aeron:udp?endpoint="+third+"|session-id=tag:99", 5)
		require.ErrorContains(t, err, "session-id=tag:99 must reference a network publication")
	})
}
