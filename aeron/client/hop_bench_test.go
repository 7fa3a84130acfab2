package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
)

// BenchmarkHop is one ping-pong hop without the other core: offer one
// 256-byte message on an exclusive IPC publication and poll it back, one
// at a time, in a term large enough never to meet back pressure. It is
// the client's own share of a round trip (two hops).
func BenchmarkHop(b *testing.B) {
	cfg := testConfig(b)
	cfg.IPCTermBufferLength = 64 << 20
	d := startDriver(b, cfg)
	c := connect(b, d.Dir())
	sub, err := c.AddSubscription(context.Background(), "aeron:ipc", 1)
	require.NoError(b, err)
	pub, err := c.AddExclusivePublication(context.Background(), "aeron:ipc", 1)
	require.NoError(b, err)
	waitFor(b, "image", func() bool { return sub.ImageCount() == 1 })
	msg := make([]byte, 256)
	got := false
	handler := client.NewFragmentAssembler(func([]byte, *client.Header) { got = true }).Handler()
	hop := func() {
		for pub.Offer(msg) < 0 {
		}
		for got = false; !got; {
			sub.Poll(handler, 1)
		}
	}
	for i := 0; i < 800000; i++ { // fault all the log's pages in first (3 x 64 MiB)
		hop()
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		hop()
	}
}

// BenchmarkEmptyPoll is the cost of one spin of a poll loop that finds
// nothing: what a waiting subscriber pays per look.
func BenchmarkEmptyPoll(b *testing.B) {
	cfg := testConfig(b)
	d := startDriver(b, cfg)
	c := connect(b, d.Dir())
	sub, err := c.AddSubscription(context.Background(), "aeron:ipc", 1)
	require.NoError(b, err)
	pub, err := c.AddExclusivePublication(context.Background(), "aeron:ipc", 1)
	require.NoError(b, err)
	waitFor(b, "image", func() bool { return sub.ImageCount() == 1 })
	_ = pub
	handler := func([]byte, *client.Header) {}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sub.Poll(handler, 1)
	}
}
