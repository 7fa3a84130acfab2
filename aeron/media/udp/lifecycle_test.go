package udp_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/media/udp"
)

// The lifecycle scenarios (issue 27): the same Go scenarios run against
// ibgo's driver and, when AERON_C_BIN names a build of Aeron's C driver (a
// file aeronmd, or a directory holding it), against aeronmd, with the Go
// client, and assert the same observable outcome: every message, in order,
// exactly once; the same image events; what the system counters both
// drivers have say. Checks only ibgo can answer (its ended-short counters
// and error log) run on ibgo alone.

// lifecycle timings shared by both drivers: short enough for a test, in
// the order the C driver requires (unblock > client liveness).
const (
	lcLinger         = time.Second
	lcUnblock        = 3 * time.Second
	lcClientLiveness = 2 * time.Second
	lcImageLiveness  = 2 * time.Second
	lcConnTimeout    = 2 * time.Second
	lcTermLength     = 64 << 10
	lcMessage        = 256
)

// scenarioDriver is a driver a scenario runs on.
type scenarioDriver interface {
	Dir() string
	// Kill stops the driver: aeronmd by SIGKILL, without a word to its
	// peers; ibgo's by Close, whose senders send no EOS either but whose
	// receiver still tells its publishers it went (EOS status messages),
	// so a publisher stops sending to it at once rather than after the
	// connection timeout.
	Kill()
	// ibgo is the in-process driver when it is ibgo's, else nil.
	ibgo() *driver.Driver
}

type ibgoScenarioDriver struct{ d *driver.Driver }

func (d *ibgoScenarioDriver) Dir() string          { return d.d.Dir() }
func (d *ibgoScenarioDriver) Kill()                { d.d.Close() }
func (d *ibgoScenarioDriver) ibgo() *driver.Driver { return d.d }

type cScenarioDriver struct {
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

func (d *cScenarioDriver) Dir() string          { return d.dir }
func (d *cScenarioDriver) ibgo() *driver.Driver { return nil }
func (d *cScenarioDriver) Kill() {
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
}

type driverKind struct {
	name  string
	start func(t *testing.T, simulateSpies bool) scenarioDriver
}

// scenarioDrivers: ibgo's always, Aeron's C driver with AERON_C_BIN.
func scenarioDrivers(t *testing.T) []driverKind {
	kinds := []driverKind{{"ibgo", startIbgoScenario}}
	bin := os.Getenv("AERON_C_BIN")
	if bin == "" {
		t.Log("AERON_C_BIN not set: the scenarios run against ibgo's driver only")
		return kinds
	}
	if st, err := os.Stat(bin); err == nil && st.IsDir() {
		bin = filepath.Join(bin, "aeronmd")
	}
	_, err := os.Stat(bin)
	require.NoError(t, err, "AERON_C_BIN: no aeronmd")
	return append(kinds, driverKind{"aeronmd", func(t *testing.T, simulate bool) scenarioDriver {
		return startCScenario(t, bin, simulate)
	}})
}

func startIbgoScenario(t *testing.T, simulateSpies bool) scenarioDriver {
	d, _ := startDriver(t, udp.Loss{}, func(c *driver.Config) {
		c.TermBufferLength = lcTermLength
		c.PublicationLingerTimeout = lcLinger
		c.PublicationUnblockTimeout = lcUnblock
		c.ClientLivenessTimeout = lcClientLiveness
		c.ImageLivenessTimeout = lcImageLiveness
		c.PublicationConnTimeout = lcConnTimeout
		c.SpiesSimulateConnection = simulateSpies
	})
	return &ibgoScenarioDriver{d}
}

func startCScenario(t *testing.T, bin string, simulateSpies bool) scenarioDriver {
	dir := filepath.Join(t.TempDir(), "aeron-c")
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"AERON_DIR="+dir,
		"AERON_DIR_DELETE_ON_START=true",
		"AERON_DIR_DELETE_ON_SHUTDOWN=true",
		"AERON_THREADING_MODE=SHARED",
		"AERON_TERM_BUFFER_LENGTH="+strconv.Itoa(lcTermLength),
		"AERON_PUBLICATION_LINGER_TIMEOUT="+strconv.FormatInt(lcLinger.Nanoseconds(), 10),
		"AERON_PUBLICATION_UNBLOCK_TIMEOUT="+strconv.FormatInt(lcUnblock.Nanoseconds(), 10),
		"AERON_CLIENT_LIVENESS_TIMEOUT="+strconv.FormatInt(lcClientLiveness.Nanoseconds(), 10),
		"AERON_IMAGE_LIVENESS_TIMEOUT="+strconv.FormatInt(lcImageLiveness.Nanoseconds(), 10),
		"AERON_PUBLICATION_CONNECTION_TIMEOUT="+strconv.FormatInt(lcConnTimeout.Nanoseconds(), 10),
		"AERON_SPIES_SIMULATE_CONNECTION="+strconv.FormatBool(simulateSpies),
		"AERON_TIMER_INTERVAL=50000000", // ibgo's tests run their timers every 50 ms too
	)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	d := &cScenarioDriver{dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		select {
		case <-d.done:
		default:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-d.done:
			case <-time.After(10 * time.Second):
				d.Kill()
			}
		}
		if t.Failed() {
			t.Logf("aeronmd output:\n%s", out.String())
		}
	})
	waitFor(t, "aeronmd's CnC file", func() bool {
		_, err := os.Stat(cnc.Path(dir))
		return err == nil
	})
	return d
}

// forEachDriver runs scenario on every driver kind.
func forEachDriver(t *testing.T, scenario func(t *testing.T, k driverKind)) {
	for _, k := range scenarioDrivers(t) {
		t.Run(k.name, func(t *testing.T) { scenario(t, k) })
	}
}

// recorder is a subscription that polls on its own goroutine and records
// every message's sequence number per session, and the image events.
type recorder struct {
	sub                    *client.Subscription
	mu                     sync.Mutex
	seqs                   map[int32][]uint64
	available, unavailable atomic.Int32
	total                  atomic.Int64
	// paused stops polling; pauseAt pauses once total reaches it (0: never)
	paused  atomic.Bool
	pauseAt atomic.Int64
	images  sync.Map // correlation id -> *client.Image
	stop    chan struct{}
	done    chan struct{}
}

func newRecorder(t *testing.T, cl *client.Client, channel string, stream int32, paused bool) *recorder {
	r := &recorder{seqs: map[int32][]uint64{}, stop: make(chan struct{}), done: make(chan struct{})}
	r.paused.Store(paused)
	sub, err := cl.AddSubscriptionWithHandlers(context.Background(), channel, stream,
		func(img *client.Image) { r.available.Add(1); r.images.Store(img.CorrelationID(), img) },
		func(*client.Image) { r.unavailable.Add(1) })
	require.NoError(t, err)
	r.sub = sub
	handler := client.NewFragmentAssembler(func(p []byte, h *logbuffer.Header) {
		if len(p) < 8 {
			return
		}
		r.mu.Lock()
		r.seqs[h.SessionID()] = append(r.seqs[h.SessionID()], binary.LittleEndian.Uint64(p))
		r.mu.Unlock()
		if n := r.total.Add(1); n == r.pauseAt.Load() {
			r.paused.Store(true)
		}
	}).Handler()
	go func() {
		defer close(r.done)
		for {
			select {
			case <-r.stop:
				return
			default:
			}
			if r.paused.Load() || r.sub.Poll(handler, 16) == 0 {
				time.Sleep(200 * time.Microsecond)
			}
		}
	}()
	t.Cleanup(r.close)
	return r
}

func (r *recorder) close() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
}

// session returns what one session delivered, or the only session's.
func (r *recorder) only(t *testing.T) []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Len(t, r.seqs, 1, "one session")
	for _, s := range r.seqs {
		return append([]uint64(nil), s...)
	}
	return nil
}

// requireSequence checks got is from, from+1, ..., from+n-1.
func requireSequence(t *testing.T, got []uint64, from uint64, n int, what string) {
	t.Helper()
	require.Len(t, got, n, "%s: every message exactly once", what)
	for i, s := range got {
		if s != from+uint64(i) {
			t.Fatalf("%s: message %d is %d, want %d (in order, exactly once)", what, i, s, from+uint64(i))
		}
	}
}

// offer offers messages from..from+n-1 of lcMessage bytes, waiting through
// back pressure.
func offer(t *testing.T, pub *client.Publication, from, n int) {
	t.Helper()
	msg := make([]byte, lcMessage)
	end := time.Now().Add(deadline)
	for i := from; i < from+n; {
		binary.LittleEndian.PutUint64(msg, uint64(i))
		r := pub.Offer(msg)
		if r > 0 {
			i++
			continue
		}
		require.Contains(t, []int64{client.BackPressured, client.AdminAction, client.NotConnected}, r, "offer %d: %s", i, client.ResultString(r))
		require.False(t, time.Now().After(end), "offer %d: still %s", i, client.ResultString(r))
		time.Sleep(20 * time.Microsecond)
	}
}

// anyCounter reads a counter of the driver behind cl by type and
// registration id (-1: none such).
func anyCounter(cl *client.Client, typeID int32, regID int64) int64 {
	r := cl.Counters()
	id := r.FindByTypeIDAndRegistrationID(typeID, regID)
	if id < 0 {
		return -1
	}
	return r.CounterValue(id)
}

// sysCounter reads a system counter by label through a client, on either
// driver.
func sysCounter(t *testing.T, cl *client.Client, label string) int64 {
	v, found := int64(0), false
	cl.Counters().ForEach(func(c cnc.Counter) bool {
		if c.TypeID == cnc.TypeSystem && strings.HasPrefix(c.Label, label) {
			v, found = c.Value, true
			return false
		}
		return true
	})
	require.True(t, found, "system counter %q", label)
	return v
}

// endedShort reads ibgo's two ended-short counters and its error log.
func endedShort(t *testing.T, d *driver.Driver) (pubs, images int64, errs string) {
	f, err := cnc.OpenFile(cnc.Path(d.Dir()), false)
	require.NoError(t, err)
	defer f.Close()
	var b strings.Builder
	_, err = cnc.ReadErrorLog(f.ErrorLogBuffer(), 0, func(o cnc.Observation) { b.WriteString(o.Text + "\n") })
	require.NoError(t, err)
	return systemCounter(t, d, "Publications ended with data unsent"), systemCounter(t, d, "Images ended without end of stream"), b.String()
}

// requireNothingEndedShort: ibgo counted and logged no loss.
func requireNothingEndedShort(t *testing.T, ds ...scenarioDriver) {
	t.Helper()
	for _, d := range ds {
		if d.ibgo() == nil {
			continue
		}
		pubs, images, errs := endedShort(t, d.ibgo())
		require.Zero(t, pubs+images, "nothing ended short; error log:\n%s", errs)
	}
}

func scenarioChannel(t *testing.T) string {
	return "aeron:udp?endpoint=127.0.0.1:" + strconv.Itoa(freePort(t))
}

func awaitConnected(t *testing.T, pub *client.Publication, r *recorder) {
	waitFor(t, "publication connected", pub.IsConnected)
	waitFor(t, "image available", r.sub.IsConnected)
}

// TestLifecyclePublishThenExit: a publisher offers a stream and exits at
// once while the subscriber stalls, just before the end, for longer than
// the unblock timeout. The drain waits for the live receiver (ibgo used to
// give up at the unblock timeout and lose the end of the stream): every
// message arrives once, in order, and the image goes only after that.
func TestLifecyclePublishThenExit(t *testing.T) {
	forEachDriver(t, func(t *testing.T, k driverKind) {
		pd, sd := k.start(t, false), k.start(t, false)
		channel := scenarioChannel(t)
		const n = 6000
		r := newRecorder(t, connect(t, sd.Dir()), channel, 7, false)
		r.pauseAt.Store(n - 100)
		pc, err := client.Connect(context.Background(), client.Options{Dir: pd.Dir(), IdleSleep: 100 * time.Microsecond})
		require.NoError(t, err)
		pub, err := pc.AddPublication(context.Background(), channel, 7)
		require.NoError(t, err)
		awaitConnected(t, pub, r)
		offer(t, pub, 0, n)
		require.NoError(t, pc.Close()) // the publisher exits
		waitFor(t, "the subscriber stalled", func() bool { return r.paused.Load() })
		time.Sleep(lcUnblock + time.Second)
		require.Equal(t, int32(0), r.unavailable.Load(), "the image stays while unread data is in it")
		r.paused.Store(false)
		waitFor(t, "every message", func() bool { return r.total.Load() >= n })
		waitFor(t, "image unavailable", func() bool { return r.unavailable.Load() == 1 })
		requireSequence(t, r.only(t), 0, n, k.name)
		require.Equal(t, int32(1), r.available.Load())
		requireNothingEndedShort(t, pd, sd)
	})
}

// TestLifecyclePublisherSilentWithUnreadData: the publisher's driver dies
// (no end of stream) while the subscriber has not read what arrived. The
// image drains: the subscriber reads all of it after the liveness timeout,
// and only then is the image unavailable. ibgo counts and logs the stream
// that ended without its end.
func TestLifecyclePublisherSilentWithUnreadData(t *testing.T) {
	forEachDriver(t, func(t *testing.T, k driverKind) {
		pd, sd := k.start(t, false), k.start(t, false)
		channel := scenarioChannel(t)
		sc := connect(t, sd.Dir())
		r := newRecorder(t, sc, channel, 8, false)
		pub, err := connect(t, pd.Dir()).AddPublication(context.Background(), channel, 8)
		require.NoError(t, err)
		awaitConnected(t, pub, r)
		r.paused.Store(true)
		const n = 64 // within the receiver window: nothing holds the publisher back
		offer(t, pub, 0, n)
		var imageID int64
		r.images.Range(func(k, _ any) bool { imageID = k.(int64); return false })
		final := pub.Position()
		waitFor(t, "everything received", func() bool { return anyCounter(sc, cnc.TypeReceiverPosition, imageID) == final })
		pd.Kill()
		time.Sleep(lcImageLiveness + 1500*time.Millisecond)
		require.Equal(t, int32(0), r.unavailable.Load(), "the image stays while unread data is in it")
		r.paused.Store(false)
		waitFor(t, "every message", func() bool { return r.total.Load() >= n })
		waitFor(t, "image unavailable", func() bool { return r.unavailable.Load() == 1 })
		requireSequence(t, r.only(t), 0, n, k.name)
		if d := sd.ibgo(); d != nil {
			pubs, images, errs := endedShort(t, d)
			require.Equal(t, int64(0), pubs)
			require.Equal(t, int64(1), images, "an image that ended without end of stream is counted")
			require.Contains(t, errs, "ended without end of stream at position "+strconv.FormatInt(final, 10))
		}
	})
}

// TestLifecycleEOSDoesNotRecreateImage: after a publication closes, its
// end-of-stream heartbeats during the linger never bring the image back:
// one available and one unavailable event.
func TestLifecycleEOSDoesNotRecreateImage(t *testing.T) {
	forEachDriver(t, func(t *testing.T, k driverKind) {
		pd, sd := k.start(t, false), k.start(t, false)
		channel := scenarioChannel(t)
		r := newRecorder(t, connect(t, sd.Dir()), channel, 9, false)
		pub, err := connect(t, pd.Dir()).AddPublication(context.Background(), channel, 9)
		require.NoError(t, err)
		awaitConnected(t, pub, r)
		offer(t, pub, 0, 100)
		require.NoError(t, pub.Close())
		waitFor(t, "every message", func() bool { return r.total.Load() >= 100 })
		time.Sleep(3 * lcLinger)
		require.Equal(t, int32(1), r.available.Load(), "one ON_AVAILABLE_IMAGE for one publication")
		require.Equal(t, int32(1), r.unavailable.Load())
		requireSequence(t, r.only(t), 0, 100, k.name)
		requireNothingEndedShort(t, pd, sd)
	})
}

// TestLifecycleAbandonedClaim: one client claims in a shared (non-exclusive)
// network publication and never commits; another keeps offering. After the
// unblock timeout the driver turns the claim into padding and the others'
// messages flow.
func TestLifecycleAbandonedClaim(t *testing.T) {
	forEachDriver(t, func(t *testing.T, k driverKind) {
		pd, sd := k.start(t, false), k.start(t, false)
		channel := scenarioChannel(t)
		r := newRecorder(t, connect(t, sd.Dir()), channel, 10, false)
		ca, cb := connect(t, pd.Dir()), connect(t, pd.Dir())
		pa, err := ca.AddPublication(context.Background(), channel, 10)
		require.NoError(t, err)
		pb, err := cb.AddPublication(context.Background(), channel, 10)
		require.NoError(t, err)
		require.Equal(t, pa.SessionID(), pb.SessionID(), "one shared publication")
		awaitConnected(t, pb, r)
		var claim client.BufferClaim
		require.Positive(t, pa.TryClaim(lcMessage, &claim), "claim")
		// claimed, never committed: the claimer is stuck or dead
		offer(t, pb, 0, 50)
		start := time.Now()
		waitFor(t, "the messages behind the abandoned claim", func() bool { return r.total.Load() >= 50 })
		t.Logf("%s: unblocked after %v", k.name, time.Since(start).Round(time.Millisecond))
		requireSequence(t, r.only(t), 0, 50, k.name)
		require.Equal(t, int64(1), sysCounter(t, ca, "Unblocked Publications"))
	})
}

// TestLifecycleSpyAfterReceiverLeft: with spies simulating a connection, a
// publication whose one remote receiver left goes on with its spy alone
// (ibgo kept the departed receiver and stayed back-pressured for good).
func TestLifecycleSpyAfterReceiverLeft(t *testing.T) {
	forEachDriver(t, func(t *testing.T, k driverKind) {
		pd, sd := k.start(t, true), k.start(t, false)
		channel := scenarioChannel(t)
		remote := newRecorder(t, connect(t, sd.Dir()), channel, 11, false)
		pc := connect(t, pd.Dir())
		pub, err := pc.AddPublication(context.Background(), channel, 11)
		require.NoError(t, err)
		spy := newRecorder(t, pc, "aeron-spy:"+channel, 11, false)
		awaitConnected(t, pub, remote)
		waitFor(t, "spy image", spy.sub.IsConnected)
		offer(t, pub, 0, 500)
		waitFor(t, "the remote receiver's messages", func() bool { return remote.total.Load() >= 500 })
		remote.close()
		require.NoError(t, remote.sub.Close())
		time.Sleep(lcConnTimeout + time.Second)
		require.True(t, pub.IsConnected(), "the spy keeps the publication connected")
		offer(t, pub, 500, 3000)
		waitFor(t, "every message at the spy", func() bool { return spy.total.Load() >= 3500 })
		requireSequence(t, spy.only(t), 0, 3500, k.name)
		// the publication closes with the spy alone: it read everything,
		// so nothing ended short
		require.NoError(t, pub.Close())
		waitFor(t, "the spy's image unavailable", func() bool { return spy.unavailable.Load() == 1 })
		requireNothingEndedShort(t, pd)
	})
}

// TestLifecycleLateJoin: a second subscription that joins an image while
// the first has not read yet starts where the first is, not at rcv-pos:
// both read the whole stream.
func TestLifecycleLateJoin(t *testing.T) {
	forEachDriver(t, func(t *testing.T, k driverKind) {
		pd, sd := k.start(t, false), k.start(t, false)
		channel := scenarioChannel(t)
		sc := connect(t, sd.Dir())
		first := newRecorder(t, sc, channel, 12, false)
		pub, err := connect(t, pd.Dir()).AddPublication(context.Background(), channel, 12)
		require.NoError(t, err)
		awaitConnected(t, pub, first)
		first.paused.Store(true)
		offer(t, pub, 0, 64)
		var imageID int64
		first.images.Range(func(k, _ any) bool { imageID = k.(int64); return false })
		final := pub.Position()
		waitFor(t, "everything received", func() bool { return anyCounter(sc, cnc.TypeReceiverPosition, imageID) == final })
		late := newRecorder(t, connect(t, sd.Dir()), channel, 12, false)
		waitFor(t, "the late subscription's image", late.sub.IsConnected)
		first.paused.Store(false)
		waitFor(t, "both read everything", func() bool { return first.total.Load() >= 64 && late.total.Load() >= 64 })
		requireSequence(t, first.only(t), 0, 64, k.name+" first")
		requireSequence(t, late.only(t), 0, 64, k.name+" late")
	})
}

// TestLifecycleShortLivedPublications: publications that come, offer a
// little and close, one after the other on one channel: each is one image,
// available once and unavailable once, with all of its messages.
func TestLifecycleShortLivedPublications(t *testing.T) {
	forEachDriver(t, func(t *testing.T, k driverKind) {
		pd, sd := k.start(t, false), k.start(t, false)
		channel := scenarioChannel(t)
		r := newRecorder(t, connect(t, sd.Dir()), channel, 13, false)
		pc := connect(t, pd.Dir())
		const pubs, each = 8, 20
		for i := range pubs {
			pub, err := pc.AddPublication(context.Background(), channel, 13)
			require.NoError(t, err)
			waitFor(t, fmt.Sprintf("publication %d connected", i), pub.IsConnected)
			offer(t, pub, 0, each)
			require.NoError(t, pub.Close())
		}
		waitFor(t, "every message", func() bool { return r.total.Load() >= pubs*each })
		waitFor(t, "every image unavailable", func() bool { return r.unavailable.Load() == pubs })
		time.Sleep(2 * lcLinger)
		require.Equal(t, int32(pubs), r.available.Load(), "one ON_AVAILABLE_IMAGE per publication")
		require.Equal(t, int32(pubs), r.unavailable.Load())
		r.mu.Lock()
		defer r.mu.Unlock()
		require.Len(t, r.seqs, pubs, "one session per publication")
		for session, got := range r.seqs {
			requireSequence(t, got, 0, each, fmt.Sprintf("%s session %d", k.name, session))
		}
		requireNothingEndedShort(t, pd, sd)
	})
}

const ipcChannel = "aeron:ipc?term-length=65536"

// TestLifecycleIPCDrainWaitsForIdleSubscriber: an IPC publication closed
// while its subscriber reads nothing keeps the image, past the unblock
// timeout and the linger (ibgo used to give up after the unblock timeout
// and end the image at the end of the linger, unread data and all).
func TestLifecycleIPCDrainWaitsForIdleSubscriber(t *testing.T) {
	forEachDriver(t, func(t *testing.T, k driverKind) {
		d := k.start(t, false)
		r := newRecorder(t, connect(t, d.Dir()), ipcChannel, 20, false)
		pc, err := client.Connect(context.Background(), client.Options{Dir: d.Dir(), IdleSleep: 100 * time.Microsecond})
		require.NoError(t, err)
		pub, err := pc.AddPublication(context.Background(), ipcChannel, 20)
		require.NoError(t, err)
		awaitConnected(t, pub, r)
		r.paused.Store(true)
		offer(t, pub, 0, 100)
		require.NoError(t, pc.Close())
		time.Sleep(lcUnblock + lcLinger + time.Second)
		require.Equal(t, int32(0), r.unavailable.Load(), "the image stays while unread data is in it")
		r.paused.Store(false)
		waitFor(t, "every message", func() bool { return r.total.Load() >= 100 })
		waitFor(t, "image unavailable", func() bool { return r.unavailable.Load() == 1 })
		requireSequence(t, r.only(t), 0, 100, k.name)
		requireNothingEndedShort(t, d)
	})
}

// TestLifecycleIPCUnavailableOnceDrained: ON_UNAVAILABLE_IMAGE goes out
// once the subscribers read the end, not at the end of the linger.
func TestLifecycleIPCUnavailableOnceDrained(t *testing.T) {
	forEachDriver(t, func(t *testing.T, k driverKind) {
		d := k.start(t, false)
		c := connect(t, d.Dir())
		r := newRecorder(t, c, ipcChannel, 21, false)
		pub, err := c.AddPublication(context.Background(), ipcChannel, 21)
		require.NoError(t, err)
		awaitConnected(t, pub, r)
		offer(t, pub, 0, 10)
		waitFor(t, "every message", func() bool { return r.total.Load() >= 10 })
		start := time.Now()
		require.NoError(t, pub.Close())
		waitFor(t, "image unavailable", func() bool { return r.unavailable.Load() == 1 })
		took := time.Since(start)
		t.Logf("%s: unavailable %v after close", k.name, took.Round(time.Millisecond))
		require.Less(t, took, lcLinger*7/10, "unavailable once drained, not after the linger (%v)", lcLinger)
	})
}

// TestLifecycleExclusiveIPCClaimNotUnblocked: an exclusive publication has
// one publisher, so a claim held past the unblock timeout is not taken
// away (C never unblocks an active exclusive publication; ibgo did, and the
// late commit lost its message).
func TestLifecycleExclusiveIPCClaimNotUnblocked(t *testing.T) {
	forEachDriver(t, func(t *testing.T, k driverKind) {
		d := k.start(t, false)
		c := connect(t, d.Dir())
		r := newRecorder(t, c, ipcChannel, 22, false)
		pub, err := c.AddExclusivePublication(context.Background(), ipcChannel, 22)
		require.NoError(t, err)
		awaitConnected(t, pub, r)
		var claim client.BufferClaim
		require.Positive(t, pub.TryClaim(lcMessage, &claim))
		time.Sleep(lcUnblock + 1500*time.Millisecond)
		require.Equal(t, int64(0), sysCounter(t, c, "Unblocked Publications"))
		binary.LittleEndian.PutUint64(claim.Buffer(), 0)
		claim.Commit()
		offer(t, pub, 1, 1)
		waitFor(t, "both messages", func() bool { return r.total.Load() >= 2 })
		requireSequence(t, r.only(t), 0, 2, k.name)
	})
}

// requireRun checks got is one contiguous run of sequence numbers that
// ends at last (exactly once, in order) and returns its first number.
func requireRun(t *testing.T, got []uint64, last uint64, what string) uint64 {
	t.Helper()
	require.NotEmpty(t, got, what)
	first := got[0]
	require.LessOrEqual(t, first, last, what)
	requireSequence(t, got, first, int(last-first+1), what)
	return first
}

// TestLifecycleSubscriberDriverRestart: the subscriber's driver is killed
// and a new one starts on the same endpoint; the publication, offering all
// along, connects to it, and the new subscription gets one contiguous run
// of messages up to the last, none twice.
func TestLifecycleSubscriberDriverRestart(t *testing.T) {
	forEachDriver(t, func(t *testing.T, k driverKind) {
		pd, sd := k.start(t, false), k.start(t, false)
		channel := scenarioChannel(t)
		r := newRecorder(t, connect(t, sd.Dir()), channel, 14, false)
		pub, err := connect(t, pd.Dir()).AddPublication(context.Background(), channel, 14)
		require.NoError(t, err)
		awaitConnected(t, pub, r)
		offer(t, pub, 0, 200)
		waitFor(t, "the first 200", func() bool { return r.total.Load() >= 200 })
		r.close()
		sd.Kill()
		sd2 := k.start(t, false)
		r2 := newRecorder(t, connect(t, sd2.Dir()), channel, 14, false)
		const n = 2000
		offer(t, pub, 200, n-200) // blocks while no receiver takes it
		waitFor(t, "the new subscription's image", r2.sub.IsConnected)
		waitFor(t, "the last message", func() bool {
			r2.mu.Lock()
			defer r2.mu.Unlock()
			for _, s := range r2.seqs {
				return len(s) > 0 && s[len(s)-1] == n-1
			}
			return false
		})
		first := requireRun(t, r2.only(t), n-1, k.name)
		t.Logf("%s: the new subscriber's run starts at %d", k.name, first)
		require.GreaterOrEqual(t, first, uint64(200))
		requireNothingEndedShort(t, pd, sd2)
	})
}

// TestLifecyclePublisherDriverRestart: the publisher's driver is killed and
// a new one publishes again: the subscriber sees the first image end (after
// the liveness timeout, with all it received) and a second session with
// every message of the new publication. ibgo counts the first image as
// ended without end of stream.
func TestLifecyclePublisherDriverRestart(t *testing.T) {
	forEachDriver(t, func(t *testing.T, k driverKind) {
		pd, sd := k.start(t, false), k.start(t, false)
		channel := scenarioChannel(t)
		r := newRecorder(t, connect(t, sd.Dir()), channel, 15, false)
		pub, err := connect(t, pd.Dir()).AddPublication(context.Background(), channel, 15)
		require.NoError(t, err)
		awaitConnected(t, pub, r)
		offer(t, pub, 0, 200)
		waitFor(t, "the first 200", func() bool { return r.total.Load() >= 200 })
		pd.Kill()
		pd2 := k.start(t, false)
		pub2, err := connect(t, pd2.Dir()).AddPublication(context.Background(), channel, 15)
		require.NoError(t, err)
		waitFor(t, "the new publication connected", pub2.IsConnected)
		offer(t, pub2, 0, 300)
		waitFor(t, "every message of both", func() bool { return r.total.Load() >= 500 })
		waitFor(t, "the first image unavailable", func() bool { return r.unavailable.Load() == 1 })
		require.Equal(t, int32(2), r.available.Load())
		r.mu.Lock()
		require.Len(t, r.seqs, 2, "two sessions")
		for session, got := range r.seqs {
			if session == pub2.SessionID() {
				requireSequence(t, got, 0, 300, k.name+" second session")
			} else {
				requireSequence(t, got, 0, 200, k.name+" first session")
			}
		}
		r.mu.Unlock()
		if d := sd.ibgo(); d != nil {
			_, images, _ := endedShort(t, d)
			require.Equal(t, int64(1), images, "the first image ended without end of stream")
		}
	})
}

// TestLifecycleIPCLateJoin: a subscription added while one reader is
// behind joins at the slowest reader, not the fastest, and reads what that
// one still may, on a draining publication too.
func TestLifecycleIPCLateJoin(t *testing.T) {
	forEachDriver(t, func(t *testing.T, k driverKind) {
		d := k.start(t, false)
		c := connect(t, d.Dir())
		fast := newRecorder(t, c, ipcChannel, 23, false)
		slow := newRecorder(t, c, ipcChannel, 23, true)
		pub, err := c.AddPublication(context.Background(), ipcChannel, 23)
		require.NoError(t, err)
		awaitConnected(t, pub, fast)
		waitFor(t, "the slow reader's image", slow.sub.IsConnected)
		offer(t, pub, 0, 50)
		waitFor(t, "the fast reader has all", func() bool { return fast.total.Load() >= 50 })
		require.NoError(t, pub.Close()) // draining: the slow reader has not read
		late := newRecorder(t, c, ipcChannel, 23, false)
		waitFor(t, "the late subscription's image", late.sub.IsConnected)
		slow.paused.Store(false)
		waitFor(t, "the late and slow readers have all", func() bool { return late.total.Load() >= 50 && slow.total.Load() >= 50 })
		requireSequence(t, late.only(t), 0, 50, k.name+" late")
		requireSequence(t, slow.only(t), 0, 50, k.name+" slow")
	})
}
