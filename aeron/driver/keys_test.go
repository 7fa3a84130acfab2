package driver

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/protocol"
)

// TestChannelKeysImplementedOrRefused: every key is read where it is
// accepted, and refused, naming it, where nothing would read it (issue
// 28: before, aeron:ipc took any key and ignored it, and the network
// media refused eos, sparse, pub-wnd, ssc and rejoin, which C honours).
func TestChannelKeysImplementedOrRefused(t *testing.T) {
	d, cl := startWithClient(t, udpTestConfig(t), &fakeMedia{}, client.Options{})
	ctx := context.Background()

	refused := map[string]string{
		"aeron:ipc?endpoint=127.0.0.1:4000":                            "parameter 'endpoint' has no meaning on aeron:ipc",
		"aeron:ipc?rcv-wnd=64k":                                        "parameter 'rcv-wnd' has no meaning on aeron:ipc",
		"aeron:ipc?channel-snd-ts-offset=0":                            "parameter 'channel-snd-ts-offset' has no meaning on aeron:ipc",
		"aeron:ipc?ats=false":                                          "parameter 'ats' is not supported on aeron:ipc by this driver yet",
		"aeron:ipc?rejoin=false":                                       "rejoin=false is not supported",
		"aeron:udp?endpoint=10.0.0.2:4000|ib-qp=rc":                    "ib-qp applies only to aeron:ib, not aeron:udp",
		"aeron:udp?endpoint=10.0.0.2:4000|media-rcv-ts-offset=0":       "'media-rcv-ts-offset' is not supported on aeron:udp",
		"aeron:ipc?response-correlation-id=7":                          "parameter 'response-correlation-id' has no meaning on aeron:ipc",
		"aeron:udp?endpoint=10.0.0.2:4000|stream-id=7":                 "'stream-id' is not supported",
		"aeron:ipc?term-length=64k|pub-wnd=1k":                         "pub-wnd=1024 cannot be less than the mtu=1408",
		"aeron:ipc?term-length=64k|pub-wnd=64k":                        "pub-wnd=64k: must not exceed half of term-length=65536",
		"aeron:udp?endpoint=10.0.0.2:4000|term-length=64k|pub-wnd=40k": "pub-wnd=40k: must not exceed half of term-length=65536",
	}
	for ch, want := range refused {
		_, err := cl.AddPublication(ctx, ch, 1)
		var de *client.DriverError
		require.ErrorAs(t, err, &de, ch)
		assert.Contains(t, de.Message, want, ch)
	}
	for _, ch := range []string{"aeron:ipc?session-id=tag:1", "aeron:ipc?interface=eth0", "aeron:ipc?rejoin=false"} {
		_, err := cl.AddSubscription(ctx, ch, 1)
		require.Error(t, err, "subscription %s", ch)
	}
	for _, ch := range []string{"aeron:ipc?rejoin=true|sparse=true|tether=false", "aeron:udp?endpoint=10.0.0.2:4001|rejoin=true|sparse=false"} {
		s, err := cl.AddSubscription(ctx, ch, 2)
		require.NoError(t, err, ch)
		require.NoError(t, s.Close())
	}

	// the publication keys, read: into the log's metadata, the window
	// and the shared-publication check
	for _, ch := range []string{
		"aeron:ipc?term-length=1m|sparse=true|eos=false|ssc=true|pub-wnd=128k",
		"aeron:udp?endpoint=10.0.0.2:4002|term-length=1m|sparse=true|eos=false|ssc=true|pub-wnd=128k",
	} {
		pub, err := cl.AddPublication(ctx, ch, 3)
		require.NoError(t, err, ch)
		log, err := logbuffer.Open(filepath.Join(d.Dir(), "publications", strconv.FormatInt(pub.OriginalRegistrationID(), 10)+".logbuffer"), false)
		require.NoError(t, err)
		m := log.Metadata()
		assert.True(t, m.Sparse(), ch)
		assert.False(t, m.SignalEOS(), ch)
		assert.True(t, m.SpiesSimulateConnection(), ch)
		assert.Equal(t, int32(128<<10), m.PublicationWindowLength(), ch)
		require.NoError(t, log.Close())
		// a second adder must agree on ssc (aeron_driver_conductor's
		// "existing publication has different spies simulate connection")
		_, err = cl.AddPublication(ctx, ch[:len(ch)-len("|ssc=true|pub-wnd=128k")], 3)
		var de *client.DriverError
		require.ErrorAs(t, err, &de, ch)
		assert.Contains(t, de.Message, "existing publication has different spies simulate connection: requested=false")
		require.NoError(t, pub.Close())
	}
}

// TestEOSFalseSendsNoEOS: eos=false: once drained, the publication's
// heartbeats do not carry the EOS flag (aeron_network_publication's
// signal_eos), so receivers end the image at their liveness timeout.
func TestEOSFalseSendsNoEOS(t *testing.T) {
	for _, eos := range []bool{true, false} {
		ch := "aeron:udp?endpoint=127.0.0.1:20121|term-length=64k|session-id=7|linger=1s"
		if !eos {
			ch += "|eos=false"
		}
		h := newSenderHarness(t, ch, 1001)
		sm := protocol.StatusMessage{SessionID: 7, StreamID: 1001, ReceiverWindow: 32 << 10, ReceiverID: 1}
		b := make([]byte, protocol.StatusMessageHeaderLength)
		_, err := sm.Encode(b)
		require.NoError(t, err)
		h.tr.push(netip.MustParseAddrPort("127.0.0.1:20121"), b)
		now := int64(0)
		h.step(now)
		h.closePublication(t)
		flags := map[uint8]int{}
		for i := 0; i < 10; i++ {
			now += int64(150 * time.Millisecond)
			h.step(now)
		}
		for _, dg := range h.sent() {
			var dh protocol.DataHeader
			if dh.Decode(dg.b) == nil && dh.Type == protocol.TypeData && dh.FrameLength == 0 {
				flags[dh.Flags]++
			}
		}
		if eos {
			assert.Positive(t, flags[protocol.FlagsHeartbeatEOS], "EOS heartbeats: %v", flags)
		} else {
			assert.Zero(t, flags[protocol.FlagsHeartbeatEOS], "no EOS heartbeat with eos=false: %v", flags)
			assert.Positive(t, flags[protocol.FlagsHeartbeat], "plain heartbeats: %v", flags)
		}
	}
}

// TestFailedLogFreeCounted: a log whose file cannot be deleted counts in
// system counter 17 ("Failed attempts to free log buffers") and is
// reported in the error log, where before the failure was dropped.
func TestFailedLogFreeCounted(t *testing.T) {
	cfg := udpTestConfig(t)
	cfg.ThreadingMode = Invoker
	d, err := Start(cfg, WithMedia(&fakeMedia{}))
	require.NoError(t, err)
	defer d.Close()
	path := filepath.Join(t.TempDir(), "x.logbuffer")
	log, err := logbuffer.Create(path, 64<<10, 4096)
	require.NoError(t, err)
	// a non-empty directory where the file was: the removal fails
	require.NoError(t, os.Remove(path))
	require.NoError(t, os.MkdirAll(filepath.Join(path, "sub"), 0o755))
	d.c.freeLog(log, path, 0)
	require.EqualValues(t, 1, d.c.sys[sysFailedLogFrees].Load())
	var texts []string
	_, err = cnc.ReadErrorLog(d.cnc.ErrorLogBuffer(), 0, func(o cnc.Observation) { texts = append(texts, o.Text) })
	require.NoError(t, err)
	assert.Contains(t, strings.Join(texts, "\n"), "free log "+path)
}
