package client_test

import (
	"encoding/binary"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/driver"
)

// deadline is generous: tests wait on conditions, never on timings.
const deadline = 30 * time.Second

func testConfig(t testing.TB) driver.Config {
	cfg := driver.DefaultConfig()
	cfg.Dir = filepath.Join(t.TempDir(), "aeron")
	cfg.IPCTermBufferLength = 64 << 10
	cfg.CounterValuesLength = 64 << 10
	cfg.ToDriverBufferLength = 64<<10 + 768
	cfg.ToClientsBufferLen = 64<<10 + 128
	cfg.ErrorBufferLength = 64 << 10
	cfg.LossReportLength = 64 << 10
	cfg.PublicationLingerTimeout = 100 * time.Millisecond
	cfg.TimerInterval = 50 * time.Millisecond
	return cfg
}

func startDriver(t testing.TB, cfg driver.Config) *driver.Driver {
	d, err := driver.Start(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

func connect(t testing.TB, dir string, opts ...func(*client.Options)) *client.Client {
	o := client.Options{Dir: dir}
	for _, f := range opts {
		f(&o)
	}
	c, err := client.Connect(o)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", deadline, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// offer retries transient results and fails the test on the others.
func offer(t testing.TB, p *client.Publication, msg []byte) int64 {
	end := time.Now().Add(deadline)
	for {
		r := p.Offer(msg)
		if r > 0 {
			return r
		}
		if r != client.BackPressured && r != client.AdminAction && r != client.NotConnected {
			t.Fatalf("offer: %s", client.ResultString(r))
		}
		if time.Now().After(end) {
			t.Fatalf("offer: still %s after %v", client.ResultString(r), deadline)
		}
	}
}

func TestOrderedDeliveryWithRotation(t *testing.T) {
	d := startDriver(t, testConfig(t))
	c := connect(t, d.Dir())
	sub, err := c.AddSubscription("aeron:ipc", 10)
	require.NoError(t, err)
	pub, err := c.AddPublication("aeron:ipc", 10)
	require.NoError(t, err)
	waitFor(t, "image", func() bool { return sub.ImageCount() == 1 })
	waitFor(t, "connected", pub.IsConnected)

	const n = 20000 // 20000 × 96-byte frames ≈ 30 terms of 64 KiB
	next := uint64(0)
	handler := func(p []byte, h *client.Header) {
		require.Equal(t, next, binary.LittleEndian.Uint64(p))
		next++
	}
	msg := make([]byte, 64)
	for i := uint64(0); i < n; i++ {
		binary.LittleEndian.PutUint64(msg, i)
		for {
			r := pub.Offer(msg)
			if r > 0 {
				break
			}
			require.Contains(t, []int64{client.BackPressured, client.AdminAction}, r, client.ResultString(r))
			sub.Poll(handler, 100)
		}
	}
	waitFor(t, "all messages", func() bool { sub.Poll(handler, 100); return next == n })
}
