package udp_test

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
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
	env := map[string]string{"AERON_DEBUG_RECEIVE_DATA_LOSS_RATE": "0.1", "AERON_DEBUG_SEND_DATA_LOSS_RATE": "0.02", "AERON_DEBUG_DATA_LOSS_SEED": "7",
		"IBGO_DEBUG_RECEIVE_DATA_REORDER_RATE": "0.03", "IBGO_DEBUG_RECEIVE_DATA_DUPLICATE_RATE": "0.04",
		"IBGO_DEBUG_SEND_DATA_REORDER_RATE": "0.05", "IBGO_DEBUG_SEND_DATA_DUPLICATE_RATE": "0.06"}
	l, err := udp.LossFromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, udp.Loss{ReceiveRate: 0.1, SendRate: 0.02, Seed: 7, ReceiveReorderRate: 0.03, ReceiveDuplicateRate: 0.04,
		SendReorderRate: 0.05, SendDuplicateRate: 0.06}, l)
	env["IBGO_DEBUG_SEND_DATA_REORDER_RATE"] = "-1"
	_, err = udp.LossFromEnv(func(k string) string { return env[k] })
	require.ErrorContains(t, err, "IBGO_DEBUG_SEND_DATA_REORDER_RATE")
	env["IBGO_DEBUG_SEND_DATA_REORDER_RATE"] = "0"
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
	// Held back means back pressure that lasts: right after connecting
	// the sender may have seen the first status message before the
	// conductor raised the publication limit (they are separate agents,
	// as in the C driver), which is a passing back pressure.
	var pressedSince time.Time
	for {
		binary.LittleEndian.PutUint64(msg, uint64(sent))
		r := p.pub.Offer(msg)
		if r > 0 {
			sent++
			pressedSince = time.Time{}
			continue
		}
		if r == client.BackPressured {
			if pressedSince.IsZero() {
				pressedSince = time.Now()
			} else if time.Since(pressedSince) > 300*time.Millisecond {
				break
			}
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
	// the sender met the flow control limit: a back-pressure event in
	// the publication's snd-bpe and in system counter 18
	require.Positive(t, streamCounter(t, p.pubDriver, cnc.TypeSenderBPE), "snd-bpe")
	require.Positive(t, systemCounter(t, p.pubDriver, "Sender flow control limits"))
	// an idle connected publication sends heartbeats (system counter 9)
	waitFor(t, "heartbeats sent", func() bool { return systemCounter(t, p.pubDriver, "Heartbeats sent") > 0 })
}

// TestMulticastTTLAsymmetryCounted: a SETUP whose ttl is above the
// subscription channel's (none given: 0) counts in system counter 21,
// "Possible TTL Asymmetry", as the C receiver does; a matching ttl does
// not.
func TestMulticastTTLAsymmetryCounted(t *testing.T) {
	_, _, sds, _ := multicastGroup(t, [2]string{"|ttl=4"}, [2]string{"", "|ttl=4"}, 0)
	require.Positive(t, systemCounter(t, sds[0], "Possible TTL Asymmetry"), "subscription without ttl")
	require.Zero(t, systemCounter(t, sds[1], "Possible TTL Asymmetry"), "subscription with the publisher's ttl")
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
	streamPaced(t, pub, subs, n, size, 0)
}

// streamPaced is streamTo waiting, after every pace messages (0: never),
// until every subscriber has them all.
func streamPaced(t *testing.T, pub *client.Publication, subs []*client.Subscription, n, size, pace int) {
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
			for pace > 0 && i%pace == 0 && slices.Min(next) < i {
				pollAll()
				require.False(t, time.Now().After(end), "timed out pacing: sent %d, received %v", i, next)
			}
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
// multicast channel, two subscriber drivers joined on loopback. Max lets
// the publisher run a window ahead of the fastest receiver, so a receiver
// that lost a datagram (a full socket buffer on a loaded machine) could
// fall out of the retransmit range, as with Aeron; the stream is paced
// (50 messages, 14 KiB, then both catch up) so every message must arrive.
func TestMulticastTwoSubscribers(t *testing.T) {
	pub, subs, _, pd := multicastGroup(t, [2]string{}, [2]string{}, 0)
	streamPaced(t, pub, subs[:], 2000, 256, 50)
	require.Zero(t, systemCounter(t, pd, "Invalid packets"))
}

// TestMulticastMinFlowControlUnderLoss: with fc=min the publisher waits
// for the slowest receiver, so both subscribers recover every loss.
func TestMulticastMinFlowControlUnderLoss(t *testing.T) {
	pub, subs, sds, pd := multicastGroup(t, [2]string{"|fc=min"}, [2]string{}, 0.05)
	streamTo(t, pub, subs[:], 2000, 256)
	for i, sd := range sds {
		require.Positive(t, systemCounter(t, sd, "NAKs sent"), "subscriber driver %d NAKed", i)
	}
	require.Positive(t, systemCounter(t, pd, "Retransmits sent"))
	require.EqualValues(t, 2, streamCounter(t, pd, cnc.TypeFlowControlReceivers), "fc-receivers counts both receivers")
}

// offerUntilBackPressured offers messages numbered from sent on until
// the publication is back pressured and returns the next number.
func offerUntilBackPressured(t *testing.T, pub *client.Publication, size, sent int) int {
	msg := make([]byte, size)
	end := time.Now().Add(deadline)
	for {
		binary.LittleEndian.PutUint64(msg, uint64(sent))
		r := pub.Offer(msg)
		if r > 0 {
			sent++
			continue
		}
		if r == client.BackPressured {
			return sent
		}
		require.False(t, time.Now().After(end), "timed out: offer result %d", r)
		time.Sleep(time.Millisecond)
	}
}

// TestMulticastFlowControlSlowSubscriber: a subscriber that does not poll
// holds the publisher back under fc=min (nothing lost once it reads) but
// not under max, where the fast subscriber gets everything.
func TestMulticastFlowControlSlowSubscriber(t *testing.T) {
	t.Run("min", func(t *testing.T) {
		pub, subs, _, _ := multicastGroup(t, [2]string{"|fc=min"}, [2]string{}, 0)
		// the fast subscriber reads; the slow one does not
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				subs[0].Poll(func([]byte, *logbuffer.Header) {}, 256)
				time.Sleep(time.Millisecond)
			}
		}()
		defer func() { close(stop); <-done }()
		sent := offerUntilBackPressured(t, pub, 256, 0)
		for range 3 { // the sender drains the log up to the limit meanwhile
			time.Sleep(100 * time.Millisecond)
			sent = offerUntilBackPressured(t, pub, 256, sent)
		}
		// 64 KiB terms: receiver window 32 KiB, publication window 32 KiB.
		require.LessOrEqual(t, sent*288, 64<<10+288, "the slow subscriber holds the publisher")
		next := 0
		waitFor(t, "every held-back message at the slow subscriber", func() bool {
			subs[1].Poll(func(p []byte, _ *logbuffer.Header) {
				require.Equal(t, next, int(binary.LittleEndian.Uint64(p)))
				next++
			}, 256)
			return next == sent
		})
	})
	t.Run("max", func(t *testing.T) {
		pub, subs, _, _ := multicastGroup(t, [2]string{"|fc=max"}, [2]string{}, 0)
		streamTo(t, pub, subs[:1], 3000, 256) // 3000 x 288 bytes: far beyond the slow subscriber's window
	})
}

// TestMulticastTaggedFlowControl: fc=tagged,g:99/2 waits for two receivers
// whose status messages carry group tag 99; an untagged one does not count.
func TestMulticastTaggedFlowControl(t *testing.T) {
	base := multicastChannel(t, "")
	pd, _ := startDriver(t, udp.Loss{}, nil)
	pub, err := connect(t, pd.Dir()).AddPublication(context.Background(), base+"|fc=tagged,g:99/2", 1001)
	require.NoError(t, err)
	var subs []*client.Subscription
	add := func(extra string, mod func(*driver.Config)) {
		sd, _ := startDriver(t, udp.Loss{}, mod)
		s, err := connect(t, sd.Dir()).AddSubscription(context.Background(), base+extra, 1001)
		require.NoError(t, err)
		waitFor(t, "image", s.IsConnected)
		subs = append(subs, s)
	}
	add("|gtag=99", nil)
	add("", nil)
	time.Sleep(500 * time.Millisecond)
	require.False(t, pub.IsConnected(), "one tagged receiver of the required two")
	require.EqualValues(t, 1, streamCounter(t, pd, cnc.TypeFlowControlReceivers))
	add("", func(c *driver.Config) { c.Network.ReceiverGroupTag, c.Network.HasReceiverGroupTag = 99, true }) // AERON_RECEIVER_GROUP_TAG
	waitFor(t, "connected with two tagged receivers", pub.IsConnected)
	streamTo(t, pub, []*client.Subscription{subs[0], subs[2]}, 1000, 256)
}

// streamCounter reads the first counter of a type in a running driver.
func streamCounter(t *testing.T, d *driver.Driver, typeID int32) int64 {
	f, err := cnc.OpenFile(cnc.Path(d.Dir()), false)
	require.NoError(t, err)
	defer f.Close()
	r, err := f.Counters()
	require.NoError(t, err)
	v, found := int64(0), false
	r.ForEach(func(c cnc.Counter) bool {
		if c.TypeID == typeID {
			v, found = c.Value, true
			return false
		}
		return true
	})
	require.True(t, found, "counter of type %d", typeID)
	return v
}

// TestUnreliableGapsFilled: reliable=false on the subscription: a lost
// datagram becomes padding after the loss delay instead of a NAK, so the
// subscriber sees fewer messages, each once and in order, and reaches the
// publisher's position.
func TestUnreliableGapsFilled(t *testing.T) {
	p := connectPair(t, 0.05, "|reliable=false")
	const n = 3000
	msg := make([]byte, 256)
	got, last := 0, -1
	fh := func(payload []byte, _ *logbuffer.Header) {
		seq := int(binary.LittleEndian.Uint64(payload))
		require.Greater(t, seq, last, "message out of order or duplicated")
		last = seq
		got++
	}
	end := time.Now().Add(deadline)
	for i := 0; i < n; {
		binary.LittleEndian.PutUint64(msg, uint64(i))
		if p.pub.Offer(msg) > 0 {
			i++
		} else {
			p.sub.Poll(fh, 64)
			time.Sleep(10 * time.Microsecond)
		}
		require.False(t, time.Now().After(end), "timed out offering: sent %d", i)
	}
	waitFor(t, "the subscriber at the publisher's position", func() bool {
		p.sub.Poll(fh, 256)
		return p.sub.Images()[0].Position() == p.pub.Position()
	})
	require.Less(t, got, n, "lost messages are skipped, not recovered")
	require.Greater(t, got, n*8/10)
	require.Positive(t, systemCounter(t, p.subDriver, "Loss gap fills"))
	require.Zero(t, systemCounter(t, p.subDriver, "NAKs sent"), "an unreliable image never NAKs")
	require.Zero(t, systemCounter(t, p.pubDriver, "Retransmits sent"))
}

func TestEndpointOptionConflictsRefused(t *testing.T) {
	d, _ := startDriver(t, udp.Loss{}, nil)
	c := connect(t, d.Dir())
	ch := "aeron:udp?endpoint=127.0.0.1:" + strconv.Itoa(freePort(t))
	_, err := c.AddSubscription(context.Background(), ch, 1)
	require.NoError(t, err)
	_, err = c.AddSubscription(context.Background(), ch+"|reliable=false", 2)
	require.ErrorContains(t, err, "reliable")
	_, err = c.AddSubscription(context.Background(), ch+"|gtag=3", 2)
	require.ErrorContains(t, err, "gtag=3")
	_, err = c.AddSubscription(context.Background(), ch+"|group=true", 2)
	require.ErrorContains(t, err, "group=true")
	_, err = c.AddSubscription(context.Background(), ch+"|reliable=true|group=infer", 2)
	require.NoError(t, err, "the same settings share the endpoint")
	tagged := "aeron:udp?endpoint=127.0.0.1:" + strconv.Itoa(freePort(t)) + "|gtag=3"
	_, err = c.AddSubscription(context.Background(), tagged, 3)
	require.NoError(t, err)
	_, err = c.AddSubscription(context.Background(), tagged, 4)
	require.NoError(t, err, "the same gtag shares the endpoint")
}

// TestReorderDuplicateLoss: the publisher's driver reorders and
// duplicates DATA on send, the subscriber's drops, reorders and
// duplicates on receive; every message arrives once and in order, on
// unicast and on multicast with fc=min.
func TestReorderDuplicateLoss(t *testing.T) {
	sendSide := udp.Loss{Seed: 5, SendReorderRate: 0.05, SendDuplicateRate: 0.05}
	recvSide := func(seed uint64) udp.Loss {
		return udp.Loss{Seed: seed, ReceiveRate: 0.05, ReceiveReorderRate: 0.05, ReceiveDuplicateRate: 0.05}
	}
	t.Run("unicast", func(t *testing.T) {
		pd, pm := startDriver(t, sendSide, nil)
		sd, sm := startDriver(t, recvSide(6), nil)
		channel := "aeron:udp?endpoint=127.0.0.1:" + strconv.Itoa(freePort(t))
		sub, err := connect(t, sd.Dir()).AddSubscription(context.Background(), channel, 9)
		require.NoError(t, err)
		pub, err := connect(t, pd.Dir()).AddPublication(context.Background(), channel, 9)
		require.NoError(t, err)
		waitFor(t, "connected", func() bool { return pub.IsConnected() && sub.IsConnected() })
		p := &pair{pubDriver: pd, subDriver: sd, pub: pub, sub: sub}
		p.stream(t, 3000, 256)
		for _, m := range []*udp.Media{pm, sm} {
			require.Positive(t, m.Reordered.Load())
			require.Positive(t, m.Duplicated.Load())
		}
		require.Positive(t, sm.Dropped.Load())
	})
	t.Run("multicast", func(t *testing.T) {
		base := multicastChannel(t, "|fc=min")
		pd, _ := startDriver(t, sendSide, nil)
		var subs []*client.Subscription
		for i := range 2 {
			sd, _ := startDriver(t, recvSide(uint64(7+i)), nil)
			s, err := connect(t, sd.Dir()).AddSubscription(context.Background(), base, 9)
			require.NoError(t, err)
			subs = append(subs, s)
		}
		pub, err := connect(t, pd.Dir()).AddPublication(context.Background(), base, 9)
		require.NoError(t, err)
		waitFor(t, "connected", func() bool { return pub.IsConnected() && subs[0].IsConnected() && subs[1].IsConnected() })
		streamTo(t, pub, subs, 3000, 256)
	})
}

// TestMulticastLateSubscriber: a subscriber joining a running multicast
// stream sees DATA of an unknown session, asks for a SETUP on the control
// group and gets an image that joins at the stream's current position.
func TestMulticastLateSubscriber(t *testing.T) {
	pub, subs, _, _ := multicastGroup(t, [2]string{}, [2]string{}, 0)
	streamPaced(t, pub, subs[:], 500, 256, 50)
	sd, _ := startDriver(t, udp.Loss{}, nil)
	late, err := connect(t, sd.Dir()).AddSubscription(context.Background(), pub.Channel(), 1001)
	require.NoError(t, err)
	// keep the stream moving until the late subscriber has an image
	msg := make([]byte, 256)
	waitFor(t, "an image for the late subscriber", func() bool {
		pub.Offer(msg)
		for _, s := range subs {
			s.Poll(func([]byte, *logbuffer.Header) {}, 256)
		}
		time.Sleep(time.Millisecond)
		return late.IsConnected()
	})
	require.Greater(t, late.Images()[0].JoinPosition(), int64(500*288-1), "joined at the running stream's position")
}

// TestMulticastMinFlowControlReceiverGone: under fc=min a receiver whose
// driver goes away stops holding the publisher back (EOS status message,
// or the t: timeout), and the remaining subscriber gets everything.
func TestMulticastMinFlowControlReceiverGone(t *testing.T) {
	pub, subs, sds, pd := multicastGroup(t, [2]string{"|fc=min,t:500ms"}, [2]string{}, 0)
	streamTo(t, pub, subs[:], 200, 256)
	require.NoError(t, sds[1].Close())
	waitFor(t, "fc-receivers down to one", func() bool { return streamCounter(t, pd, cnc.TypeFlowControlReceivers) == 1 })
	streamTo(t, pub, subs[:1], 3000, 256) // far beyond the gone receiver's window
}

// TestMulticastIPv6: an IPv6 group (IPV6_JOIN_GROUP by interface index)
// through the first up, multicast-capable interface with a non-link-local
// IPv6 address; skipped when the machine has none (loopback cannot carry
// IPv6 multicast).
func TestMulticastIPv6(t *testing.T) {
	var ifAddr netip.Addr
	ifs, _ := net.Interfaces()
	for _, ifi := range ifs {
		if ifi.Flags&net.FlagUp == 0 || ifi.Flags&net.FlagMulticast == 0 || ifi.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifi.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Is6() && !ip.Is4In6() && !ip.IsLinkLocalUnicast() {
					ifAddr = ip
				}
			}
		}
		if ifAddr.IsValid() {
			break
		}
	}
	if !ifAddr.IsValid() {
		t.Skip("no up, multicast-capable interface with a routable IPv6 address")
	}
	ch := "aeron:udp?endpoint=[ff12::1:" + strconv.FormatInt(int64(1+2*(freePort(t)%1000)), 16) + "]:" + strconv.Itoa(freePort(t)) +
		"|interface=[" + ifAddr.String() + "]"
	pd, _ := startDriver(t, udp.Loss{}, nil)
	sd, _ := startDriver(t, udp.Loss{}, nil)
	sub, err := connect(t, sd.Dir()).AddSubscription(context.Background(), ch, 1001)
	require.NoError(t, err)
	pub, err := connect(t, pd.Dir()).AddPublication(context.Background(), ch, 1001)
	require.NoError(t, err)
	waitFor(t, "connected over IPv6 multicast", func() bool { return pub.IsConnected() && sub.IsConnected() })
	streamTo(t, pub, []*client.Subscription{sub}, 1000, 256)
}
