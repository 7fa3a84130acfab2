package client_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/driver"
)

func setup(t *testing.T, stream int32) (*driver.Driver, *client.Client, *client.Publication, *client.Subscription) {
	d := startDriver(t, testConfig(t))
	c := connect(t, d.Dir())
	sub, err := c.AddSubscription(context.Background(), "aeron:ipc", stream)
	require.NoError(t, err)
	pub, err := c.AddPublication(context.Background(), "aeron:ipc", stream)
	require.NoError(t, err)
	waitFor(t, "image", func() bool { return sub.ImageCount() == 1 })
	return d, c, pub, sub
}

func TestFragmentationAndReassembly(t *testing.T) {
	_, _, pub, sub := setup(t, 1)
	require.Equal(t, 1408-32, pub.MaxPayloadLength())
	require.Equal(t, 8192, pub.MaxMessageLength(), "term length / 8")
	sizes := []int{0, 1, 1376, 1377, 5000, 8192}
	var got [][]byte
	asm := client.NewFragmentAssembler(func(p []byte, _ *client.Header) { got = append(got, bytes.Clone(p)) })
	for i, n := range sizes {
		msg := bytes.Repeat([]byte{byte('a' + i)}, n)
		offer(t, pub, msg)
	}
	require.Equal(t, client.PublicationError, pub.Offer(make([]byte, 8193)), "longer than the max message")
	waitFor(t, "reassembled messages", func() bool { sub.Poll(asm.Handler(), 10); return len(got) == len(sizes) })
	for i, n := range sizes {
		require.Equal(t, bytes.Repeat([]byte{byte('a' + i)}, n), got[i])
	}

	// ControlledPoll: abort the first delivery of each message once.
	got = got[:0]
	aborted := map[int]bool{}
	casm := client.NewControlledFragmentAssembler(func(p []byte, _ *client.Header) client.Action {
		if !aborted[len(got)] {
			aborted[len(got)] = true
			return client.ActionAbort
		}
		got = append(got, bytes.Clone(p))
		return client.ActionCommit
	})
	for i, n := range sizes {
		offer(t, pub, bytes.Repeat([]byte{byte('A' + i)}, n))
	}
	waitFor(t, "controlled reassembly", func() bool { sub.ControlledPoll(casm.Handler(), 10); return len(got) == len(sizes) })
	for i, n := range sizes {
		require.Equal(t, bytes.Repeat([]byte{byte('A' + i)}, n), got[i])
	}
}

func TestBackPressureAndNotConnected(t *testing.T) {
	d := startDriver(t, testConfig(t))
	c := connect(t, d.Dir())
	pub, err := c.AddPublication(context.Background(), "aeron:ipc", 2)
	require.NoError(t, err)
	require.Equal(t, client.NotConnected, pub.Offer([]byte("nobody listens")))
	require.False(t, pub.IsConnected())
	sub, err := c.AddSubscription(context.Background(), "aeron:ipc", 2)
	require.NoError(t, err)
	waitFor(t, "connected", pub.IsConnected)
	waitFor(t, "limit", func() bool { return pub.PublicationLimit() > 0 })
	msg := make([]byte, 200)
	var r int64
	for r = pub.Offer(msg); r > 0 || r == client.AdminAction; r = pub.Offer(msg) {
	}
	require.Equal(t, client.BackPressured, r)
	// The window is half a term ahead of the subscriber.
	require.Equal(t, int64(32<<10), pub.PublicationLimit())
	require.GreaterOrEqual(t, pub.Position(), pub.PublicationLimit())
	n := 0
	waitFor(t, "drain", func() bool { n += sub.Poll(func([]byte, *client.Header) {}, 100); return n > 0 && pub.Offer(msg) > 0 })
}

func TestExclusiveAndLateJoiningSubscribers(t *testing.T) {
	d := startDriver(t, testConfig(t))
	c := connect(t, d.Dir())
	ex1, err := c.AddExclusivePublication(context.Background(), "aeron:ipc", 3)
	require.NoError(t, err)
	ex2, err := c.AddExclusivePublication(context.Background(), "aeron:ipc", 3)
	require.NoError(t, err)
	require.NotEqual(t, ex1.SessionID(), ex2.SessionID(), "each exclusive publication is a session of its own")
	early, err := c.AddSubscription(context.Background(), "aeron:ipc", 3)
	require.NoError(t, err)
	waitFor(t, "two images", func() bool { return early.ImageCount() == 2 })
	for i := 0; i < 10; i++ {
		offer(t, ex1, []byte{1, byte(i)})
	}
	count := map[int32]int{}
	h := func(p []byte, hd *client.Header) { count[hd.SessionID()]++ }
	waitFor(t, "early reads 10", func() bool { early.Poll(h, 10); return count[ex1.SessionID()] == 10 })

	late, err := c.AddSubscription(context.Background(), "aeron:ipc?session-id="+fmt.Sprint(ex1.SessionID()), 3)
	require.NoError(t, err)
	waitFor(t, "late image", func() bool { return late.ImageCount() == 1 })
	img := late.Images()[0]
	require.Equal(t, ex1.SessionID(), img.SessionID(), "session-id filter")
	require.Equal(t, ex1.Position(), img.JoinPosition(), "a late subscriber joins at the consumers' position")
	offer(t, ex1, []byte{9})
	var lateGot [][]byte
	waitFor(t, "late sees only new", func() bool {
		late.Poll(func(p []byte, _ *client.Header) { lateGot = append(lateGot, bytes.Clone(p)) }, 10)
		return len(lateGot) == 1
	})
	require.Equal(t, []byte{9}, lateGot[0])
}

func TestConcurrentOffersFromGoroutines(t *testing.T) {
	_, _, pub, sub := setup(t, 4)
	const writers, n = 4, 2000
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := make([]byte, 40)
			for i := 0; i < n; i++ {
				binary.LittleEndian.PutUint32(msg, uint32(w))
				binary.LittleEndian.PutUint64(msg[4:], uint64(i))
				for {
					r := pub.Offer(msg)
					if r > 0 {
						break
					}
					if r != client.BackPressured && r != client.AdminAction {
						panic(client.ResultString(r))
					}
					runtime.Gosched() // let the subscriber run on a loaded machine
				}
			}
		}()
	}
	next := make([]uint64, writers)
	total := 0
	waitFor(t, "all", func() bool {
		sub.Poll(func(p []byte, _ *client.Header) {
			w := binary.LittleEndian.Uint32(p)
			require.Equal(t, next[w], binary.LittleEndian.Uint64(p[4:]))
			next[w]++
			total++
		}, 100)
		return total == writers*n
	})
	wg.Wait()
}

func TestCountersAndSystemCounters(t *testing.T) {
	d, c, pub, sub := setup(t, 5)
	r := c.Counters()
	// System counters: the C driver's ids, types and labels.
	for i, label := range cnc.SystemCounterLabels {
		require.Equal(t, int32(0), r.CounterTypeID(int32(i)))
		require.True(t, strings.HasPrefix(r.CounterLabel(int32(i)), label), "counter %d: %q", i, r.CounterLabel(int32(i)))
	}
	require.Equal(t, "Errors: version=1.48.0 commit=ibgo", r.CounterLabel(15))
	require.Equal(t, int64(driver.Version), r.CounterValue(34))
	require.Equal(t, "Control protocol version", r.CounterLabel(43))
	require.Equal(t, int64(driver.ControlProtocolVersion), r.CounterValue(43))

	// Stream counters as the C driver labels them.
	labels := map[string]cnc.Counter{}
	r.ForEach(func(ctr cnc.Counter) bool { labels[ctr.Label] = ctr; return true })
	reg := pub.OriginalRegistrationID()
	lmt, ok := labels[fmt.Sprintf("pub-lmt: %d %d 5 aeron:ipc ", reg, pub.SessionID())]
	require.True(t, ok, "pub-lmt row in %v", keys(labels))
	require.Equal(t, int32(cnc.TypePublisherLimit), lmt.TypeID)
	require.Equal(t, c.ClientID(), lmt.OwnerID)
	sp, ok := labels[fmt.Sprintf("sub-pos: %d %d 5 aeron:ipc @0", sub.RegistrationID(), pub.SessionID())]
	require.True(t, ok, "sub-pos row in %v", keys(labels))
	require.Equal(t, reg, sp.ReferenceID)
	hbLabel := fmt.Sprintf("client-heartbeat: id=%d name= version=1.48.0 commit=ibgo", c.ClientID())
	waitFor(t, "heartbeat label", func() bool {
		return r.CounterLabel(r.FindByTypeIDAndRegistrationID(cnc.TypeClientHeartbeatTimestamp, c.ClientID())) == hbLabel
	})

	offer(t, pub, make([]byte, 100))
	waitFor(t, "pub-pos sampled", func() bool {
		for _, ctr := range labels {
			if ctr.TypeID == cnc.TypePublisherPosition {
				return r.CounterValue(ctr.ID) == pub.Position()
			}
		}
		return false
	})

	ctr, err := c.AddCounter(context.Background(), 2001, []byte{1, 2, 3}, "my counter")
	require.NoError(t, err)
	require.Equal(t, "my counter", r.CounterLabel(ctr.ID()))
	require.Equal(t, int32(2001), r.CounterTypeID(ctr.ID()))
	require.Equal(t, []byte{1, 2, 3}, r.CounterKey(ctr.ID())[:3])
	ctr.Value().Store(42)
	require.Equal(t, int64(42), r.CounterValue(ctr.ID()))
	require.NoError(t, ctr.Close())
	require.NotEqual(t, int32(cnc.RecordAllocated), r.CounterState(ctr.ID()))

	st1, err := c.AddStaticCounter(context.Background(), 2002, nil, "static", 777)
	require.NoError(t, err)
	st2, err := c.AddStaticCounter(context.Background(), 2002, nil, "static", 777)
	require.NoError(t, err)
	require.Equal(t, st1.ID(), st2.ID(), "a static counter is found again by type and registration id")

	sid, err := c.NextAvailableSessionID(context.Background(), 5)
	require.NoError(t, err)
	require.False(t, sid >= -1 && sid <= 1000, "reserved session ids are skipped")
	_ = d
}

func keys(m map[string]cnc.Counter) []string {
	var s []string
	for k := range m {
		s = append(s, k)
	}
	return s
}

func TestErrorsAreTypedAndDriverKeepsServing(t *testing.T) {
	d := startDriver(t, testConfig(t))
	c := connect(t, d.Dir())
	_, err := c.AddPublication(context.Background(), "aeron:udp?endpoint=localhost:40123", 1)
	var de *client.DriverError
	require.ErrorAs(t, err, &de)
	require.Equal(t, client.InvalidChannel, de.Code)
	require.Contains(t, de.Message, "not supported")
	_, err = c.AddSubscription(context.Background(), "aeron:ib?endpoint=10.0.0.1:40123", 1)
	require.ErrorIs(t, err, client.InvalidChannel)
	_, err = c.AddPublication(context.Background(), "aeron:ipc?term-length=1000", 1)
	require.ErrorIs(t, err, client.InvalidChannel)
	_, err = c.AddSubscription(context.Background(), "not a uri", 1)
	require.ErrorIs(t, err, client.InvalidChannel)

	errorsBefore := c.CounterValue(15)
	// A hostile client: unknown command, truncated commands, lengths that lie.
	hdr := binary.LittleEndian.AppendUint64(nil, uint64(c.ClientID()))
	hdr = binary.LittleEndian.AppendUint64(hdr, 999)
	require.NoError(t, c.SendRaw(0x77, hdr))
	require.NoError(t, c.SendRaw(cnc.CmdAddPublication, hdr[:12]))
	lying := binary.LittleEndian.AppendUint32(append([]byte(nil), hdr...), 1)
	lying = binary.LittleEndian.AppendUint32(lying, 1<<30) // channel length far past the message
	require.NoError(t, c.SendRaw(cnc.CmdAddPublication, lying))
	require.NoError(t, c.SendRaw(cnc.CmdAddSubscription, append(append([]byte(nil), hdr...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0xf0, 0xff, 0xff, 0xff)))
	require.NoError(t, c.SendRaw(cnc.CmdAddCounter, append(append([]byte(nil), hdr...), 1, 0, 0, 0, 200, 0, 0, 0)))
	require.NoError(t, c.SendRaw(cnc.CmdRemovePublication, hdr))
	waitFor(t, "errors counted", func() bool { return c.CounterValue(15) >= errorsBefore+6 })

	var text strings.Builder
	_, err = cnc.ReadErrorLog(cncErrorLog(t, d.Dir()), 0, func(o cnc.Observation) { fmt.Fprintln(&text, o.Text) })
	require.NoError(t, err)
	require.Contains(t, text.String(), "command type id 0x77 unknown")
	require.Contains(t, text.String(), "malformed ADD_PUBLICATION")
	require.Contains(t, text.String(), "malformed ADD_COUNTER")

	// And the driver still serves everyone.
	pub, err := c.AddPublication(context.Background(), "aeron:ipc", 9)
	require.NoError(t, err)
	require.NoError(t, pub.Close())
	require.ErrorIs(t, c.SendRaw(cnc.CmdRemovePublication, nil), nil)
	require.True(t, errors.Is(&client.DriverError{Code: client.UnknownPublication}, client.UnknownPublication))
}

func cncErrorLog(t *testing.T, dir string) []byte {
	f, err := cnc.Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f.ErrorLogBuffer()
}

func TestHotPathsDoNotAllocate(t *testing.T) {
	_, c, pub, sub := setup(t, 6)
	ex, err := c.AddExclusivePublication(context.Background(), "aeron:ipc", 6)
	require.NoError(t, err)
	waitFor(t, "second image", func() bool { return sub.ImageCount() == 2 })
	msg := make([]byte, 256)
	handler := func([]byte, *client.Header) {}
	var claim client.BufferClaim
	allocs := testing.AllocsPerRun(1000, func() {
		for pub.Offer(msg) < 0 {
			sub.Poll(handler, 10)
		}
		for pub.TryClaim(64, &claim) < 0 {
			sub.Poll(handler, 10)
		}
		claim.Commit()
		for ex.Offer(msg) < 0 {
			sub.Poll(handler, 10)
		}
		for ex.TryClaim(64, &claim) < 0 {
			sub.Poll(handler, 10)
		}
		claim.Commit()
		sub.Poll(handler, 10)
	})
	require.Zero(t, allocs)
}

func TestPublicationCloseMakesImageUnavailable(t *testing.T) {
	d := startDriver(t, testConfig(t))
	var mu sync.Mutex
	var gone []int64
	c := connect(t, d.Dir(), func(o *client.Options) {
		o.OnUnavailableImage = func(img *client.Image) { mu.Lock(); gone = append(gone, img.CorrelationID()); mu.Unlock() }
	})
	sub, err := c.AddSubscription(context.Background(), "aeron:ipc", 7)
	require.NoError(t, err)
	pub, err := c.AddPublication(context.Background(), "aeron:ipc", 7)
	require.NoError(t, err)
	waitFor(t, "image", func() bool { return sub.ImageCount() == 1 })
	img := sub.Images()[0]
	offer(t, pub, []byte("last words"))
	require.NoError(t, pub.Close())
	require.Equal(t, client.Closed, pub.Offer([]byte("x")))
	n := 0
	waitFor(t, "end of stream", func() bool { n += sub.Poll(func([]byte, *client.Header) {}, 10); return img.IsEndOfStream() })
	require.Equal(t, 1, n)
	waitFor(t, "image unavailable", func() bool { mu.Lock(); defer mu.Unlock(); return len(gone) == 1 })
	require.Equal(t, 0, sub.ImageCount())
	require.True(t, img.IsClosed())

	// The counters tell the same story: no stream rows left, nothing mapped,
	// and the log file is gone.
	r := c.Counters()
	waitFor(t, "stream counters freed", func() bool {
		left := 0
		r.ForEach(func(ctr cnc.Counter) bool {
			if ctr.TypeID == cnc.TypePublisherLimit || ctr.TypeID == cnc.TypePublisherPosition || ctr.TypeID == cnc.TypeSubscriberPosition {
				left++
			}
			return true
		})
		return left == 0
	})
	require.Zero(t, r.CounterValue(35), "Bytes currently mapped")
	entries, err := os.ReadDir(filepath.Join(d.Dir(), "publications"))
	require.NoError(t, err)
	require.Empty(t, entries)
	require.Zero(t, r.CounterValue(15), "no errors")
}

func TestClientTimedOutByDriver(t *testing.T) {
	cfg := testConfig(t)
	cfg.ClientLivenessTimeout = 300 * time.Millisecond
	d := startDriver(t, cfg)
	errs := make(chan error, 4)
	c := connect(t, d.Dir(), func(o *client.Options) {
		o.KeepaliveInterval = time.Hour // a client that stopped sending keepalives
		o.OnError = func(err error) { errs <- err }
	})
	pub, err := c.AddPublication(context.Background(), "aeron:ipc", 8)
	require.NoError(t, err)
	select {
	case err := <-errs:
		require.ErrorIs(t, err, client.ErrClientTimeout)
	case <-time.After(deadline):
		t.Fatal("no client timeout")
	}
	require.Equal(t, client.Closed, pub.Offer([]byte("x")))
	require.Equal(t, int64(1), c.CounterValue(24), "Client liveness timeouts")
}

func TestStartPositionAndMaxPositionExceeded(t *testing.T) {
	d := startDriver(t, testConfig(t))
	c := connect(t, d.Dir())
	// Two frames of 96 bytes before the end of the last possible term
	// (term id 2^31-1 from initial term id 0, 64 KiB terms: position 2^47).
	ch := "aeron:ipc?term-length=64k|init-term-id=0|term-id=2147483647|term-offset=65344"
	pub, err := c.AddExclusivePublication(context.Background(), ch, 11)
	require.NoError(t, err)
	const maxPos = int64(1) << 47
	require.Equal(t, maxPos-192, pub.Position())
	sub, err := c.AddSubscription(context.Background(), "aeron:ipc", 11)
	require.NoError(t, err)
	waitFor(t, "image", func() bool { return sub.ImageCount() == 1 })
	require.Equal(t, maxPos-192, sub.Images()[0].JoinPosition())
	waitFor(t, "limit", func() bool { return pub.PublicationLimit() > pub.Position() })
	msg := make([]byte, 64)
	require.Equal(t, maxPos-96, offer(t, pub, msg))
	require.Equal(t, maxPos, offer(t, pub, msg))
	require.Equal(t, client.MaxPositionExceeded, pub.Offer(msg))
	n := 0
	waitFor(t, "both messages", func() bool { n += sub.Poll(func([]byte, *client.Header) {}, 10); return n == 2 })

	_, err = c.AddPublication(context.Background(), "aeron:ipc?init-term-id=5|term-id=5|term-offset=0", 11)
	require.NoError(t, err, "a concurrent publication of its own on the stream")
	_, err = c.AddPublication(context.Background(), "aeron:ipc?init-term-id=6|term-id=6|term-offset=0", 11)
	require.ErrorIs(t, err, client.InvalidChannel, "conflicts with the existing concurrent publication")
}

func TestConnectWaitsForADriverReplacingAStaleDirectory(t *testing.T) {
	cfg := testConfig(t)
	old, err := driver.Start(cfg)
	require.NoError(t, err)
	require.NoError(t, old.Close()) // leaves a cnc.dat whose heartbeat is 0
	type res struct {
		c   *client.Client
		err error
	}
	done := make(chan res, 1)
	go func() {
		c, err := client.Connect(context.Background(), client.Options{Dir: cfg.Dir, DriverTimeout: deadline})
		done <- res{c, err}
	}()
	time.Sleep(50 * time.Millisecond) // let Connect find the stale file first (not needed for correctness)
	startDriver(t, cfg)
	r := <-done
	require.NoError(t, r.err)
	defer r.c.Close()
	_, err = r.c.AddSubscription(context.Background(), "aeron:ipc", 1)
	require.NoError(t, err, "connected to the new driver, not the stale file")
}

// BenchmarkOfferPoll is one goroutine offering 256-byte messages and
// polling them back: the client's own cost per message, no contention.
func BenchmarkOfferPoll(b *testing.B) {
	for _, exclusive := range []bool{false, true} {
		b.Run(map[bool]string{false: "concurrent", true: "exclusive"}[exclusive], func(b *testing.B) {
			cfg := testConfig(b)
			cfg.IPCTermBufferLength = 16 << 20
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
			n := 0
			handler := func([]byte, *client.Header) { n++ }
			b.SetBytes(256)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for pub.Offer(msg) < 0 {
					sub.Poll(handler, 64)
				}
				if i&63 == 63 {
					sub.Poll(handler, 64)
				}
			}
			for n < b.N {
				sub.Poll(handler, 64)
			}
		})
	}
}
