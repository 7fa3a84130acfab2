package udp_test

import (
	"context"
	"encoding/binary"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/logbuffer"
)

// TestChannelTimestamps: a publication with channel-snd-ts-offset=8 and a
// subscription with channel-rcv-ts-offset=0 and media-rcv-ts-offset=reserved
// (C 1.48's keys). Each message, sent alone in its datagram, arrives with
// the send time at payload offset 8, the driver's receive time at offset
// 0 and the kernel's receive time (SO_TIMESTAMPNS) in the header's
// reserved value, all realtime nanoseconds between the offer and the
// poll, in order. A second subscription on the endpoint with another
// offset gets C's refusal. On ibgo's driver and, with AERON_C_BIN, aeronmd.
func TestChannelTimestamps(t *testing.T) {
	forEachDriver(t, func(t *testing.T, k driverKind) {
		ctx := context.Background()
		d := k.start(t, false)
		cl := connect(t, d.Dir())
		ep := "127.0.0.1:" + strconv.Itoa(freePort(t))
		sub, err := cl.AddSubscription(ctx, "aeron:udp?endpoint="+ep+"|channel-rcv-ts-offset=0|media-rcv-ts-offset=reserved", 1)
		require.NoError(t, err)
		_, err = cl.AddSubscription(ctx, "aeron:udp?endpoint="+ep+"|channel-rcv-ts-offset=16|media-rcv-ts-offset=reserved", 2)
		require.ErrorContains(t, err, "option conflicts with existing subscription: channel-rcv-ts-offset=16")
		pub, err := cl.AddPublication(ctx, "aeron:udp?endpoint="+ep+"|channel-snd-ts-offset=8", 1)
		require.NoError(t, err)
		_, err = cl.AddPublication(ctx, "aeron:udp?endpoint="+ep+"|channel-snd-ts-offset=reserved", 2)
		require.ErrorContains(t, err, "option conflicts with existing subscription: channel-snd-ts-offset=-8 (reserved)")
		waitFor(t, "connected", func() bool { return pub.IsConnected() && sub.IsConnected() })

		msg := make([]byte, 32)
		for i := range 10 {
			binary.LittleEndian.PutUint64(msg[16:], uint64(i))
			before := time.Now().UnixNano()
			for pub.Offer(msg) < 0 {
				time.Sleep(20 * time.Microsecond)
			}
			got := false
			waitFor(t, "message "+strconv.Itoa(i), func() bool {
				sub.Poll(func(b []byte, h *logbuffer.Header) {
					after := time.Now().UnixNano()
					rcv, snd, media := int64(binary.LittleEndian.Uint64(b)), int64(binary.LittleEndian.Uint64(b[8:])), h.ReservedValue()
					require.EqualValues(t, i, binary.LittleEndian.Uint64(b[16:]), "the payload beyond the stamps is the publisher's")
					for name, ts := range map[string]int64{"channel send": snd, "channel receive": rcv, "media receive": media} {
						require.True(t, ts >= before && ts <= after, "%s timestamp %d outside [%d, %d]", name, ts, before, after)
					}
					require.LessOrEqual(t, snd, media, "sent before the kernel took it")
					require.LessOrEqual(t, media, rcv, "the kernel took it before the driver")
					got = true
				}, 1)
				return got
			})
		}
	})
}
