package udp_test

import (
	"context"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/media/udp"
)

// deadline bounds every wait: generous, for a loaded 2-core machine. No
// assertion depends on timing.
const deadline = 60 * time.Second

func startDriver(t testing.TB, loss udp.Loss, mod func(*driver.Config)) (*driver.Driver, *udp.Media) {
	cfg := driver.DefaultConfig()
	cfg.Dir = filepath.Join(t.TempDir(), "aeron")
	cfg.TermBufferLength = 64 << 10
	cfg.CounterValuesLength = 64 << 10
	cfg.ToDriverBufferLength = 64<<10 + 768
	cfg.ToClientsBufferLen = 64<<10 + 128
	cfg.ErrorBufferLength = 64 << 10
	cfg.LossReportLength = 64 << 10
	cfg.TimerInterval = 50 * time.Millisecond
	cfg.PublicationLingerTimeout = 100 * time.Millisecond
	cfg.ConductorIdle = "sleep-ns,100000"
	if mod != nil {
		mod(&cfg)
	}
	m := udp.New(loss)
	d, err := driver.Start(cfg, driver.WithMedia(m))
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d, m
}

func connect(t testing.TB, dir string) *client.Client {
	c, err := client.Connect(context.Background(), client.Options{Dir: dir, IdleSleep: 100 * time.Microsecond})
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

// freePort finds a UDP port free on loopback now.
func freePort(t testing.TB) int {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

type pair struct {
	pubDriver, subDriver *driver.Driver
	subMedia             *udp.Media
	pub                  *client.Publication
	sub                  *client.Subscription
	channel              string
}

// connectPair starts two drivers (the subscriber's with receive loss),
// a publication in one and a subscription in the other on one unicast
// channel, and waits until both sides are connected.
func connectPair(t *testing.T, recvLoss float64, channelExtra string, subCfg ...func(*driver.Config)) *pair {
	pd, _ := startDriver(t, udp.Loss{}, nil)
	var mod func(*driver.Config)
	if len(subCfg) > 0 {
		mod = subCfg[0]
	}
	sd, sm := startDriver(t, udp.Loss{ReceiveRate: recvLoss, Seed: 42}, mod)
	pc, sc := connect(t, pd.Dir()), connect(t, sd.Dir())
	channel := "aeron:udp?endpoint=127.0.0.1:" + strconv.Itoa(freePort(t)) + channelExtra
	ctx := context.Background()
	sub, err := sc.AddSubscription(ctx, channel, 1001)
	require.NoError(t, err)
	pub, err := pc.AddPublication(ctx, channel, 1001)
	require.NoError(t, err)
	waitFor(t, "publication connected", pub.IsConnected)
	waitFor(t, "image available", sub.IsConnected)
	return &pair{pubDriver: pd, subDriver: sd, subMedia: sm, pub: pub, sub: sub, channel: channel}
}

// stream sends n sequence-numbered messages of size bytes and checks each
// arrives once and in order.
func (p *pair) stream(t *testing.T, n, size int) {
	msg := make([]byte, size)
	next := 0
	fh := client.NewFragmentAssembler(func(payload []byte, h *logbuffer.Header) {
		require.Len(t, payload, size)
		got := int(binary.LittleEndian.Uint64(payload))
		require.Equal(t, next, got, "message out of order or duplicated")
		next++
	}).Handler()
	end := time.Now().Add(deadline)
	for i := 0; i < n; {
		binary.LittleEndian.PutUint64(msg, uint64(i))
		if p.pub.Offer(msg) > 0 {
			i++
		} else {
			p.sub.Poll(fh, 64)
			time.Sleep(10 * time.Microsecond)
		}
		require.False(t, time.Now().After(end), "timed out offering: sent %d, received %d", i, next)
	}
	waitFor(t, "every message", func() bool { p.sub.Poll(fh, 256); return next == n })
}

func TestUnicastLoopback(t *testing.T) {
	for _, loss := range []float64{0, 0.05, 0.10} {
		t.Run(strconv.FormatFloat(loss*100, 'f', 0, 64)+"%", func(t *testing.T) {
			p := connectPair(t, loss, "")
			// 64 KiB terms: 2,000 messages of 256 bytes (288 aligned) rotate
			// the term about 9 times.
			p.stream(t, 2000, 256)
			require.Greater(t, p.sub.Images()[0].Position(), int64(8*64<<10), "the terms rotated several times")
			if loss > 0 {
				require.Positive(t, p.subMedia.Dropped.Load(), "the loss generator dropped data")
				require.Positive(t, systemCounter(t, p.subDriver, "NAKs sent"), "the receiver NAKed the gaps")
				require.Positive(t, systemCounter(t, p.pubDriver, "Retransmits sent"), "the sender retransmitted")
				loss, err := os.ReadFile(cnc.LossReportPath(p.subDriver.Dir()))
				require.NoError(t, err)
				var entries []cnc.LossEntry
				_, err = cnc.ReadLossReport(loss, func(e cnc.LossEntry) { entries = append(entries, e) })
				require.NoError(t, err)
				require.Len(t, entries, 1, "one loss report entry for the image")
				require.Positive(t, entries[0].ObservationCount)
				require.Equal(t, p.channel, entries[0].Channel)
			}
		})
	}
}

func TestFragmentedMessagesUnderLoss(t *testing.T) {
	p := connectPair(t, 0.05, "|mtu=1408")
	p.stream(t, 300, 3000) // each message is three frames
	require.Positive(t, systemCounter(t, p.pubDriver, "Retransmits sent"))
}

// systemCounter reads a system counter of a running driver by label.
func systemCounter(t *testing.T, d *driver.Driver, label string) int64 {
	f, err := cnc.OpenFile(cnc.Path(d.Dir()), false)
	require.NoError(t, err)
	defer f.Close()
	r, err := f.Counters()
	require.NoError(t, err)
	v, found := int64(0), false
	r.ForEach(func(c cnc.Counter) bool {
		if c.TypeID == cnc.TypeSystem && strings.HasPrefix(c.Label, label) {
			v, found = c.Value, true
			return false
		}
		return true
	})
	require.True(t, found, "system counter %q", label)
	return v
}

func TestPublisherClosedImageUnavailable(t *testing.T) {
	p := connectPair(t, 0, "")
	p.stream(t, 100, 64)
	require.NoError(t, p.pub.Close())
	waitFor(t, "image unavailable after the publisher closed", func() bool { return !p.sub.IsConnected() })
}

func TestPublisherDriverGoneImageUnavailable(t *testing.T) {
	p := connectPair(t, 0, "", func(c *driver.Config) { c.ImageLivenessTimeout = 300 * time.Millisecond })
	p.stream(t, 100, 64)
	// Stopping the publisher's driver sends no end of stream: the image
	// must go after the liveness timeout.
	require.NoError(t, p.pubDriver.Close())
	waitFor(t, "image unavailable after the liveness timeout", func() bool { return !p.sub.IsConnected() })
}

func TestLossFromEnv(t *testing.T) {
	env := map[string]string{"AERON_DEBUG_RECEIVE_DATA_LOSS_RATE": "0.1", "AERON_DEBUG_SEND_DATA_LOSS_RATE": "0.02", "AERON_DEBUG_DATA_LOSS_SEED": "7"}
	l, err := udp.LossFromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, udp.Loss{ReceiveRate: 0.1, SendRate: 0.02, Seed: 7}, l)
	env["AERON_DEBUG_RECEIVE_DATA_LOSS_RATE"] = "2"
	_, err = udp.LossFromEnv(func(k string) string { return env[k] })
	require.ErrorContains(t, err, "AERON_DEBUG_RECEIVE_DATA_LOSS_RATE")
}

func TestSendLoss(t *testing.T) {
	pd, pm := startDriver(t, udp.Loss{SendRate: 0.05, Seed: 3}, nil)
	sd, _ := startDriver(t, udp.Loss{}, nil)
	pc, sc := connect(t, pd.Dir()), connect(t, sd.Dir())
	channel := "aeron:udp?endpoint=127.0.0.1:" + strconv.Itoa(freePort(t))
	sub, err := sc.AddSubscription(context.Background(), channel, 7)
	require.NoError(t, err)
	pub, err := pc.AddPublication(context.Background(), channel, 7)
	require.NoError(t, err)
	waitFor(t, "connected", func() bool { return pub.IsConnected() && sub.IsConnected() })
	p := &pair{pubDriver: pd, subDriver: sd, pub: pub, sub: sub}
	p.stream(t, 1000, 200)
	require.Positive(t, pm.Dropped.Load())
}

func TestSubscriptionRemovedImageGoes(t *testing.T) {
	p := connectPair(t, 0, "")
	p.stream(t, 50, 64)
	old := p.sub.Images()[0].CorrelationID()
	require.NoError(t, p.sub.Close())
	// The receiver drops the image nobody wants; a new subscription then
	// gets a new image (a fresh SETUP, a new correlation id) rather than
	// joining the old one.
	c := connect(t, p.subDriver.Dir())
	sub, err := c.AddSubscription(context.Background(), p.channel, 1001)
	require.NoError(t, err)
	waitFor(t, "a new image", sub.IsConnected)
	require.NotEqual(t, old, sub.Images()[0].CorrelationID())
}

// TestSlowReceiverHoldsPublisher: a subscriber that does not poll holds
// the publisher back through the receiver window and the publication
// window; nothing is lost once it reads again.
func TestSlowReceiverHoldsPublisher(t *testing.T) {
	p := connectPair(t, 0, "")
	msg := make([]byte, 256)
	sent := 0
	end := time.Now().Add(deadline)
	for {
		binary.LittleEndian.PutUint64(msg, uint64(sent))
		r := p.pub.Offer(msg)
		if r > 0 {
			sent++
			continue
		}
		if r == client.BackPressured {
			break
		}
		require.False(t, time.Now().After(end), "timed out: offer result %d", r)
		time.Sleep(time.Millisecond)
	}
	// 64 KiB terms: receiver window 32 KiB, publication window 32 KiB.
	require.LessOrEqual(t, sent*288, 64<<10+288, "the publisher was held back by the windows")
	require.Positive(t, sent)
	next := 0
	fh := func(payload []byte, _ *logbuffer.Header) {
		require.Equal(t, next, int(binary.LittleEndian.Uint64(payload)))
		next++
	}
	waitFor(t, "every message held back", func() bool { p.sub.Poll(fh, 256); return next == sent })
}

// multicastChannel is a fresh group and port on loopback.
func multicastChannel(t *testing.T, extra string) string {
	return "aeron:udp?endpoint=224.0.1." + strconv.Itoa(1+2*(freePort(t)%100)) + ":" + strconv.Itoa(freePort(t)) + "|interface=127.0.0.1" + extra
}

// multicastGroup: one publisher and a subscriber in each of two more
// drivers on one multicast channel; returns the publication and the
// subscriptions once everything is connected.
func multicastGroup(t *testing.T, pubExtra, subExtra [2]string, loss float64) (*client.Publication, [2]*client.Subscription, [2]*driver.Driver, *driver.Driver) {
	base := multicastChannel(t, "")
	pd, _ := startDriver(t, udp.Loss{}, nil)
	var subs [2]*client.Subscription
	var sds [2]*driver.Driver
	for i := range subs {
		sd, _ := startDriver(t, udp.Loss{ReceiveRate: loss, Seed: uint64(11 + i)}, nil)
		sc := connect(t, sd.Dir())
		sub, err := sc.AddSubscription(context.Background(), base+subExtra[i], 1001)
		require.NoError(t, err)
		subs[i], sds[i] = sub, sd
	}
	pc := connect(t, pd.Dir())
	pub, err := pc.AddPublication(context.Background(), base+pubExtra[0], 1001)
	require.NoError(t, err)
	waitFor(t, "publication connected", pub.IsConnected)
	for i := range subs {
		waitFor(t, "image available in subscriber "+strconv.Itoa(i), subs[i].IsConnected)
	}
	return pub, subs, sds, pd
}

// streamTo sends n sequence-numbered messages and checks every subscriber
// gets each once and in order.
func streamTo(t *testing.T, pub *client.Publication, subs []*client.Subscription, n, size int) {
	msg := make([]byte, size)
	next := make([]int, len(subs))
	handlers := make([]client.FragmentHandler, len(subs))
	for i := range subs {
		handlers[i] = client.NewFragmentAssembler(func(payload []byte, h *logbuffer.Header) {
			require.Len(t, payload, size)
			require.Equal(t, next[i], int(binary.LittleEndian.Uint64(payload)), "subscriber %d: message out of order or duplicated", i)
			next[i]++
		}).Handler()
	}
	pollAll := func() {
		for i, s := range subs {
			s.Poll(handlers[i], 256)
		}
	}
	end := time.Now().Add(deadline)
	for i := 0; i < n; {
		binary.LittleEndian.PutUint64(msg, uint64(i))
		if pub.Offer(msg) > 0 {
			i++
		} else {
			pollAll()
			time.Sleep(10 * time.Microsecond)
		}
		require.False(t, time.Now().After(end), "timed out offering: sent %d, received %v", i, next)
	}
	end = time.Now().Add(deadline)
	waitFor(t, "every message at every subscriber", func() bool {
		require.False(t, time.Now().After(end.Add(-time.Second)), "received %v of %d", next, n)
		pollAll()
		for _, v := range next {
			if v != n {
				return false
			}
		}
		return true
	})
}

// TestMulticastTwoSubscribers: the default (max) flow control on a
// multicast channel, two subscriber drivers joined on loopback.
func TestMulticastTwoSubscribers(t *testing.T) {
	pub, subs, _, pd := multicastGroup(t, [2]string{}, [2]string{}, 0)
	streamTo(t, pub, subs[:], 2000, 256)
	require.Zero(t, systemCounter(t, pd, "Invalid packets"))
}
