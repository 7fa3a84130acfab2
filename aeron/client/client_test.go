package client_test

import (
	"context"
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
	c, err := client.Connect(context.Background(), o)
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
	for _, exclusive := range []bool{false, true} {
		t.Run(map[bool]string{false: "concurrent", true: "exclusive"}[exclusive], func(t *testing.T) {
			d := startDriver(t, testConfig(t))
			c := connect(t, d.Dir())
			sub, err := c.AddSubscription(context.Background(), "aeron:ipc", 10)
			require.NoError(t, err)
			add := c.AddPublication
			if exclusive {
				add = c.AddExclusivePublication
			}
			pub, err := add(context.Background(), "aeron:ipc", 10)
			require.NoError(t, err)
			waitFor(t, "image", func() bool { return sub.ImageCount() == 1 })
			waitFor(t, "connected", pub.IsConnected)

			// 20000 messages ≈ 30 terms of 64 KiB; every 100th is
			// fragmented, every 7th written with TryClaim.
			const n = 20000
			next := uint64(0)
			asm := client.NewFragmentAssembler(func(p []byte, h *client.Header) {
				require.Equal(t, next, binary.LittleEndian.Uint64(p))
				if next%100 == 0 {
					require.Len(t, p, 3000)
				}
				next++
			})
			msg := make([]byte, 3000)
			var claim client.BufferClaim
			for i := uint64(0); i < n; i++ {
				binary.LittleEndian.PutUint64(msg, i)
				for {
					var r int64
					switch {
					case i%100 == 0:
						r = pub.Offer(msg)
					case i%7 == 0:
						if r = pub.TryClaim(64, &claim); r > 0 {
							binary.LittleEndian.PutUint64(claim.Buffer(), i)
							claim.Commit()
						}
					default:
						r = pub.Offer(msg[:64])
					}
					if r > 0 {
						require.Equal(t, pub.Position(), r)
						break
					}
					require.Contains(t, []int64{client.BackPressured, client.AdminAction}, r, client.ResultString(r))
					sub.Poll(asm.Handler(), 100)
				}
			}
			waitFor(t, "all messages", func() bool { sub.Poll(asm.Handler(), 100); return next == n })
		})
	}
}
