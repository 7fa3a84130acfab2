package client_test

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
)

// AERON_CLIENT_PRE_TOUCH_MAPPED_MEMORY reads as the C client's
// aeron_parse_bool: a prefix of 1, on or true is true, of 0, off or false
// is false, anything else keeps the default.
func TestEnvBool(t *testing.T) {
	for _, c := range []struct {
		v        string
		def, out bool
	}{
		{"", false, false}, {"", true, true},
		{"1", false, true}, {"on", false, true}, {"true", false, true}, {"truex", false, true},
		{"0", true, false}, {"off", true, false}, {"false", true, false},
		{"yes", false, false}, {"yes", true, true}, {"TRUE", false, false},
	} {
		require.Equal(t, c.out, client.EnvBool(c.v, c.def), "%q default %v", c.v, c.def)
	}
}

// A client pre-touches the logs it maps when the environment asks, and a
// stream through pre-touched logs is delivered as any other.
func TestPreTouchMappedMemory(t *testing.T) {
	t.Setenv("AERON_CLIENT_PRE_TOUCH_MAPPED_MEMORY", "") // the default, whatever the caller's environment
	cfg := testConfig(t)
	startDriver(t, cfg)
	require.False(t, connect(t, cfg.Dir).PreTouching())
	require.True(t, connect(t, cfg.Dir, func(o *client.Options) { o.PreTouchMappedMemory = true }).PreTouching())
	t.Setenv("AERON_CLIENT_PRE_TOUCH_MAPPED_MEMORY", "true")
	c := connect(t, cfg.Dir)
	require.True(t, c.PreTouching())
	sub, err := c.AddSubscription(context.Background(), "aeron:ipc", 10)
	require.NoError(t, err)
	pub, err := c.AddExclusivePublication(context.Background(), "aeron:ipc", 10)
	require.NoError(t, err)
	waitFor(t, "image", func() bool { return sub.ImageCount() == 1 })
	waitFor(t, "connected", pub.IsConnected)
	const n = 5000 // about 5 terms of 64 KiB: each pre-touched log rotates
	next := uint64(0)
	h := func(p []byte, _ *client.Header) {
		require.Equal(t, next, binary.LittleEndian.Uint64(p))
		next++
	}
	msg := make([]byte, 64)
	for i := uint64(0); i < n; i++ {
		binary.LittleEndian.PutUint64(msg, i)
		for r := pub.Offer(msg); r < 0; r = pub.Offer(msg) {
			require.Contains(t, []int64{client.BackPressured, client.AdminAction}, r, client.ResultString(r))
			sub.Poll(h, 100)
		}
	}
	waitFor(t, "all messages", func() bool { sub.Poll(h, 100); return next == n })
}
