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

// BenchmarkOfferPollBatch is the client's CPU cost per 256-byte message on
// the throughput path without the other core: 64 Offers on a concurrent
// IPC publication (as `ibgo aeron throughput` and Aeron's
// streaming_publisher use), then one Poll of 64 fragments, never meeting
// back pressure: run with -benchtime=40000x (see below).
func BenchmarkOfferPollBatch(b *testing.B) {
	benchOfferPollBatch(b, false)
}

// BenchmarkOfferPollBatchExclusive is BenchmarkOfferPollBatch on an
// exclusive publication.
func BenchmarkOfferPollBatchExclusive(b *testing.B) {
	benchOfferPollBatch(b, true)
}

func benchOfferPollBatch(b *testing.B, exclusive bool) {
	const termLength = 32 << 20
	cfg := testConfig(b)
	cfg.IPCTermBufferLength = termLength
	d := startDriver(b, cfg)
	c := connect(b, d.Dir())
	sub, err := c.AddSubscription(context.Background(), "aeron:ipc", 1)
	require.NoError(b, err)
	add := c.AddPublication
	if exclusive {
		add = c.AddExclusivePublication
	}
	pub, err := add(context.Background(), "aeron:ipc", 1)
	require.NoError(b, err)
	waitFor(b, "image", func() bool { return sub.ImageCount() == 1 })
	msg := make([]byte, 256)
	const batch = 64
	n := 0
	handler := func([]byte, *client.Header) { n++ }
	round := func() {
		for i := 0; i < batch; i++ {
			for pub.Offer(msg) < 0 {
			}
		}
		for n = 0; n < batch; {
			sub.Poll(handler, batch)
		}
	}
	// Fault every page of the three terms into the client's two mappings
	// of the log (publication and image), then wait until the driver's
	// conductor has moved the publication limit a window ahead: the timed
	// part (-benchtime of at most 40000x, 11.5 MB) then never waits for
	// the conductor, whose scheduling on a loaded machine would dominate.
	for i := 0; i < 3*termLength/288/batch+batch; i++ {
		round()
	}
	waitFor(b, "the publication limit", func() bool { return pub.PublicationLimit()-pub.Position() >= termLength/2-termLength/16 })
	if b.N > 40000 {
		b.Fatalf("-benchtime %dx: at most 40000x fit in the publication window", b.N)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		round()
	}
}
