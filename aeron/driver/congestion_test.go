package driver

import (
	"context"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/protocol"
)

// cubicWant is W_cubic(t) = w_max + C(t-K)^3, truncated toward zero as the
// C driver's (int32_t) cast, capped at max_cwnd: the reference the
// controller is checked against.
func cubicWant(wMax, maxCwnd int64, t float64) int64 {
	k := math.Cbrt(float64(wMax) * 0.2 / 0.4)
	return min(maxCwnd, wMax+int64(0.4*math.Pow(t-k, 3)))
}

// TestCubicWindowEvolution follows one controller through start, growth,
// a loss and recovery, against hand-computed values and the formula.
func TestCubicWindowEvolution(t *testing.T) {
	const mtu, ms, s = 1408, int64(1e6), int64(1e9)
	// 64 KiB terms and a 128 KiB initial window: max window 32 KiB,
	// max_cwnd 23 MTUs, initial cwnd 10 (14 080 bytes, the window of the C
	// driver's cubic SMs in the reference capture)
	c := newCubic(CubicConfig{}, 64<<10, 128<<10, mtu, 0)
	require.Equal(t, int64(23), c.maxCwnd)
	require.Equal(t, int64(14080), c.initialWindow())
	require.InDelta(t, 2.2572, c.k, 1e-4) // cbrt(23 x 0.2 / 0.4)

	// within the 100 µs update timeout nothing changes
	w, force := c.onTrackRebuild(50_000, 0, 0, false)
	require.Equal(t, int64(14080), w)
	require.False(t, force)
	// first update at 0.2 ms: 23 + trunc(0.4 x (0.0002 - 2.2572)^3) = 23 - 4 = 19
	w, force = c.onTrackRebuild(200_000, 0, 0, false)
	require.Equal(t, int64(19*mtu), w)
	require.False(t, force)
	// 0.5 s: 23 + trunc(0.4 x (0.5 - 2.2572)^3) = 23 - 2 = 21
	w, _ = c.onTrackRebuild(500*ms, 0, 0, false)
	require.Equal(t, int64(21*mtu), w)
	for _, at := range []int64{700 * ms, 900 * ms, 1 * s, 2 * s} {
		w, _ = c.onTrackRebuild(at, 0, 0, false)
		require.Equal(t, cubicWant(23, 23, float64(at)/1e9)*mtu, w, "at %d ns", at)
	}
	w, _ = c.onTrackRebuild(3*s, 0, 0, false)
	require.Equal(t, int64(23*mtu), w, "at max_cwnd after K")

	// a loss: w_max = 23, cwnd = trunc(23 x 0.8) = 18, SM forced
	w, force = c.onTrackRebuild(3*s+ms, 0, 0, true)
	require.Equal(t, int64(18*mtu), w)
	require.True(t, force)
	// a second loss right after: w_max = 18, K = cbrt(9), cwnd = trunc(18 x 0.8) = 14
	w, _ = c.onTrackRebuild(3*s+2*ms, 0, 0, true)
	require.Equal(t, int64(14*mtu), w)
	require.InDelta(t, math.Cbrt(9), c.k, 1e-12)
	// recovery from the last loss along W_cubic with w_max 18
	for _, dt := range []int64{ms, 500 * ms, s, 2 * s, 3 * s, 5 * s} {
		w, _ = c.onTrackRebuild(3*s+2*ms+dt, 0, 0, false)
		require.Equal(t, cubicWant(18, 23, float64(dt)/1e9)*mtu, w, "%d ns after the loss", dt)
	}
	require.Equal(t, int64(23*mtu), w, "back at max_cwnd")
}

// TestCubicSmallWindow: with a one-MTU window, consumption beyond the last
// SM forces an SM (the C driver's cwnd == 1 rule); the window never drops
// below one MTU.
func TestCubicSmallWindow(t *testing.T) {
	c := newCubic(CubicConfig{}, 64<<10, 1408, 1408, 0)
	require.Equal(t, int64(1), c.cwnd)
	w, force := c.onTrackRebuild(1e6, 100, 0, false)
	require.Equal(t, int64(1408), w)
	require.True(t, force)
	_, force = c.onTrackRebuild(2e6, 100, 100, false)
	require.False(t, force)
	w, _ = c.onTrackRebuild(3e6, 100, 100, true)
	require.Equal(t, int64(1408), w, "cwnd is at least 1")
}

// TestCubicTCPMode: in the TCP-friendly region (cubic below w_max) the
// window is at least w_max(1-B) + 3B/(2-B) x t/RTT (capped at max_cwnd).
func TestCubicTCPMode(t *testing.T) {
	c := newCubic(CubicConfig{TCPMode: true}, 1<<20, 1<<20, 1024, 0)
	require.Equal(t, int64(512), c.maxCwnd)
	c.onTrackRebuild(1e6, 0, 0, true) // w_max = 10, K = cbrt(5), cwnd = 8
	require.Equal(t, int64(8), c.cwnd)
	// 10 ms later: cubic 10 + trunc(0.4 x (0.01 - 1.71)^3) = 9 < w_max, and
	// TCP with the initial 100 µs RTT: trunc(8 + 0.3333 x 0.01 / 0.0001) = 41
	w, _ := c.onTrackRebuild(11e6, 0, 0, false)
	require.Equal(t, int64(41*1024), w)
	// a 1 s RTT measured, then a loss: w_max = 41, cwnd = 32; 0.5 s later
	// cubic gives 41 + trunc(0.4 x (0.5 - cbrt(20.5))^3) = 37, TCP
	// trunc(32.8 + 0.3333 x 0.5) = 32: cubic wins
	c.onRTTM(12e6, 1e9)
	c.onTrackRebuild(20e6, 0, 0, true)
	require.Equal(t, int64(32), c.cwnd)
	w, _ = c.onTrackRebuild(520e6, 0, 0, false)
	require.Equal(t, int64(37*1024), w)
}

// TestCubicRTTMeasurement: RTTM requests only with MEASURERTT, no sooner
// than max(rtt, initial rtt) x 4 after the last request or reply.
func TestCubicRTTMeasurement(t *testing.T) {
	off := newCubic(CubicConfig{}, 64<<10, 128<<10, 1408, 0)
	require.False(t, off.shouldMeasureRTT(1e9))
	c := newCubic(CubicConfig{MeasureRTT: true}, 64<<10, 128<<10, 1408, 0)
	require.False(t, c.shouldMeasureRTT(400_000), "4 x 100 µs not yet passed")
	require.True(t, c.shouldMeasureRTT(400_001))
	c.onRTTMSent(500_000)
	require.False(t, c.shouldMeasureRTT(900_000))
	require.True(t, c.shouldMeasureRTT(900_001))
	c.onRTTM(600_000, 1_000_000) // 1 ms: next after 4 ms
	require.Equal(t, int64(1_000_000), c.rttNs.Load())
	require.False(t, c.shouldMeasureRTT(4_600_000))
	require.True(t, c.shouldMeasureRTT(4_600_001))
}

func TestCubicConfigFromEnv(t *testing.T) {
	env := map[string]string{"AERON_CUBICCONGESTIONCONTROL_MEASURERTT": "true", "AERON_CUBICCONGESTIONCONTROL_INITIALRTT": "250us",
		"AERON_CUBICCONGESTIONCONTROL_TCPMODE": "true"}
	cfg, err := ConfigFromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, CubicConfig{MeasureRTT: true, InitialRTT: 250_000, TCPMode: true}, cfg.Cubic)
	env["AERON_CUBICCONGESTIONCONTROL_INITIALRTT"] = "soon"
	_, err = ConfigFromEnv(func(k string) string { return env[k] })
	require.ErrorContains(t, err, "AERON_CUBICCONGESTIONCONTROL_INITIALRTT")
}

// TestCubicStatusMessagesAndRTTM: through a socketless medium, a cc=cubic
// image answering a SETUP like the reference capture's (64 KiB terms, MTU
// 1408) advertises the controller's window in its status messages, from
// the C driver's 10 MTUs = 14 080 bytes up to max_cwnd, where a static
// image advertises half a term; with MEASURERTT it sends an RTTM request,
// and the reply's round trip lands in rcv-cc-cubic-rtt.
func TestCubicStatusMessagesAndRTTM(t *testing.T) {
	for _, tc := range []struct {
		cc     string
		window int32
	}{{"|cc=cubic", 23 * 1408}, {"", 32768}} {
		t.Run("cc"+tc.cc, func(t *testing.T) {
			m := &fakeMedia{}
			cfg := udpTestConfig(t)
			cfg.Cubic.MeasureRTT = true
			d, err := Start(cfg, WithMedia(m))
			require.NoError(t, err)
			defer d.Close()
			cl, err := client.Connect(context.Background(), client.Options{Dir: d.Dir()})
			require.NoError(t, err)
			defer cl.Close()
			_, err = cl.AddSubscription(context.Background(), "aeron:udp?endpoint=127.0.0.1:20121"+tc.cc, 1001)
			require.NoError(t, err)
			tr := m.transport(netip.MustParseAddrPort("127.0.0.1:20121"))
			require.NotNil(t, tr)
			from := netip.MustParseAddrPort("127.0.0.1:40000")
			tr.push(from, rawSetup(t, &protocol.Setup{SessionID: 7, StreamID: 1001, InitialTermID: 3, ActiveTermID: 3,
				TermLength: 64 << 10, MTU: 1408}))
			// the status messages' windows: static, half a term at once;
			// cubic, 10 MTUs (or the first update's 19 when the conductor's
			// rebuild ran before the receiver answered), then growing along
			// W_cubic without loss up to max_cwnd = 23 MTUs within ~1 s
			var windows []int32
			var rttm *protocol.RTTMeasurement
			end := time.Now().Add(30 * time.Second)
			for {
				require.False(t, time.Now().After(end), "SM windows %v, RTTM %v", windows, rttm)
				windows = windows[:0]
				for _, dg := range tr.sent() {
					f, err := protocol.NextFrame(dg.b, 0)
					require.NoError(t, err)
					switch f.Header.Type {
					case protocol.TypeStatusMessage:
						var sm protocol.StatusMessage
						require.NoError(t, sm.Decode(dg.b))
						windows = append(windows, sm.ReceiverWindow)
					case protocol.TypeRTTM:
						if rttm == nil {
							rttm = &protocol.RTTMeasurement{}
							require.NoError(t, rttm.Decode(dg.b))
						}
					}
				}
				if len(windows) > 0 && windows[len(windows)-1] == tc.window && (tc.cc == "" || rttm != nil) {
					break
				}
				time.Sleep(time.Millisecond)
			}
			if tc.cc == "" {
				require.Nil(t, rttm, "a static image measured RTT")
				for _, w := range windows {
					require.Equal(t, tc.window, w)
				}
				return
			}
			require.Contains(t, []int32{10 * 1408, 19 * 1408}, windows[0], "first SM window")
			for i, w := range windows {
				require.Zero(t, w%1408, "window %d is not whole MTUs", w)
				if i > 0 {
					require.GreaterOrEqual(t, w, windows[i-1], "the window shrank without loss: %v", windows)
				}
			}
			require.Equal(t, protocol.RTTMFlagReply, rttm.Flags&protocol.RTTMFlagReply)
			require.Equal(t, from, tr.sent()[0].addr)
			// the sender's echo (aeron_network_publication_on_rttm): flags 0,
			// the request's timestamp, reception delta 0
			reply := protocol.RTTMeasurement{SessionID: 7, StreamID: 1001, EchoTimestamp: rttm.EchoTimestamp, ReceiverID: rttm.ReceiverID}
			b := make([]byte, protocol.RTTMHeaderLength)
			_, err = reply.Encode(b)
			require.NoError(t, err)
			tr.push(from, b)
			var rtt int64
			for rtt <= 0 {
				require.False(t, time.Now().After(end), "rcv-cc-cubic-rtt never set")
				f, err := cnc.OpenFile(cnc.Path(d.Dir()), false)
				require.NoError(t, err)
				r, err := f.Counters()
				require.NoError(t, err)
				r.ForEach(func(c cnc.Counter) bool {
					if strings.HasPrefix(c.Label, "rcv-cc-cubic-rtt: ") {
						rtt = c.Value
					}
					return true
				})
				f.Close()
				time.Sleep(time.Millisecond)
			}
		})
	}
}
