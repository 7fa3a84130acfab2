package udp_test

import (
	"context"
	"encoding/binary"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/media/udp"
)

func invokerDriver(t *testing.T) *driver.Driver {
	d, _ := startDriver(t, udp.Loss{}, func(c *driver.Config) { c.ThreadingMode = driver.Invoker })
	return d
}

// ipcAndUDP adds an IPC and a UDP loopback publication and subscription
// and waits until both are connected.
func ipcAndUDP(t *testing.T, c *client.Client) (ipc, net *pair) {
	ctx := context.Background()
	add := func(channel string) *pair {
		sub, err := c.AddSubscription(ctx, channel, 7)
		require.NoError(t, err)
		pub, err := c.AddPublication(ctx, channel, 7)
		require.NoError(t, err)
		waitFor(t, channel+" connected", func() bool { return pub.IsConnected() && sub.IsConnected() })
		return &pair{pub: pub, sub: sub, channel: channel}
	}
	return add("aeron:ipc?term-length=64k"), add("aeron:udp?endpoint=127.0.0.1:" + strconv.Itoa(freePort(t)) + "|term-length=64k")
}

// TestInvokerDriverRunByClient: an embedded INVOKER driver has no
// goroutine of its own; a client given it as DriverInvoker runs it from
// its conductor, and IPC and UDP messages arrive in order, across many
// terms.
func TestInvokerDriverRunByClient(t *testing.T) {
	d := invokerDriver(t)
	c, err := client.Connect(context.Background(), client.Options{Dir: d.Dir(), IdleSleep: 100 * time.Microsecond, DriverInvoker: d})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ipc, net := ipcAndUDP(t, c)
	ipc.stream(t, 2000, 256) // 64k terms: about 9 terms
	net.stream(t, 2000, 256)
}

// TestInvokerDriverStandsStill: with nobody invoking an INVOKER driver
// nothing moves: no command is answered, UDP data is not sent, an IPC
// publication's limit stays, the driver heartbeat ages. Once the test
// invokes it again, what waited is delivered, in order.
func TestInvokerDriverStandsStill(t *testing.T) {
	d := invokerDriver(t)
	var invoking atomic.Bool
	invoking.Store(true)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if !invoking.Load() || d.DoWork() == 0 {
				time.Sleep(20 * time.Microsecond)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-stopped })
	c := connect(t, d.Dir())
	ipc, net := ipcAndUDP(t, c)
	ipc.stream(t, 500, 256)
	net.stream(t, 500, 256)

	// Let the last cycles finish, then stop invoking.
	invoking.Store(false)
	time.Sleep(10 * time.Millisecond)
	f, err := cnc.OpenFile(cnc.Path(d.Dir()), false)
	require.NoError(t, err)
	defer f.Close()
	hb := f.DriverHeartbeat()

	msg := make([]byte, 256)
	seq := func(p []byte) int { return int(binary.LittleEndian.Uint64(p)) }
	// UDP: offers within the publication limit succeed, but the sender
	// does not run.
	for i := 0; i < 10; i++ {
		binary.LittleEndian.PutUint64(msg, uint64(500+i))
		require.Positive(t, net.pub.Offer(msg))
	}
	// IPC: the publisher fills its window; the subscriber reads it all,
	// and still the limit does not move.
	ipcSent := 500
	for {
		binary.LittleEndian.PutUint64(msg, uint64(ipcSent))
		r := ipc.pub.Offer(msg)
		if r == client.BackPressured {
			break
		}
		require.Positive(t, r)
		ipcSent++
	}
	require.Greater(t, ipcSent, 500)
	ipcNext, netNext := 500, 500
	ipcRead := func(p []byte, _ *logbuffer.Header) { require.Equal(t, ipcNext, seq(p)); ipcNext++ }
	netRead := func(p []byte, _ *logbuffer.Header) { require.Equal(t, netNext, seq(p)); netNext++ }
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = c.AddSubscription(ctx, "aeron:ipc", 8)
	require.ErrorIs(t, err, context.DeadlineExceeded, "no command is answered")
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
		ipc.sub.Poll(ipcRead, 100)
		net.sub.Poll(netRead, 100)
		time.Sleep(time.Millisecond)
	}
	require.Equal(t, ipcSent, ipcNext, "the IPC subscriber reads what was written")
	require.Equal(t, client.BackPressured, ipc.pub.Offer(msg), "but the publication limit stays")
	require.Equal(t, 500, netNext, "no UDP data is sent")
	require.Equal(t, hb, f.DriverHeartbeat(), "the driver heartbeat stands still")

	invoking.Store(true)
	waitFor(t, "the waiting UDP messages", func() bool { net.sub.Poll(netRead, 100); return netNext == 510 })
	waitFor(t, "the IPC limit to move", func() bool {
		binary.LittleEndian.PutUint64(msg, uint64(ipcSent))
		return ipc.pub.Offer(msg) > 0
	})
	ipcSent++
	waitFor(t, "the last IPC message", func() bool { ipc.sub.Poll(ipcRead, 100); return ipcNext == ipcSent })
	require.Greater(t, f.DriverHeartbeat(), hb, "the heartbeat moves again")
}
