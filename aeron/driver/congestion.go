package driver

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/aeron/uri"
)

// Congestion control of an image's receiver window
// (aeron_congestion_control.c): the window a receiver advertises in its
// status messages. cc=static (the default) keeps the initial window;
// cc=cubic grows and cuts it in units of the sender's MTU with TCP CUBIC's
// window function, measuring the round trip with RTTM frames when asked
// to.

// CUBIC constants of the C driver (AERON_CUBICCONGESTIONCONTROL_*).
const (
	cubicC                  = 0.4
	cubicB                  = 0.2
	cubicInitCwnd           = 10
	cubicRTTTimeoutMultiple = 4
	cubicInitialRTTDefault  = 100 * time.Microsecond
)

// CubicConfig is the driver-wide configuration of cc=cubic images, from
// AERON_CUBICCONGESTIONCONTROL_MEASURERTT (send RTTM requests, default
// false), AERON_CUBICCONGESTIONCONTROL_INITIALRTT (100 µs) and
// AERON_CUBICCONGESTIONCONTROL_TCPMODE (the TCP-friendly region, default
// false). A plain value.
type CubicConfig struct {
	MeasureRTT bool
	InitialRTT time.Duration
	TCPMode    bool
}

func (cc *CubicConfig) fromEnv(getenv func(string) string) error {
	for _, b := range []struct {
		name string
		dst  *bool
	}{{"AERON_CUBICCONGESTIONCONTROL_MEASURERTT", &cc.MeasureRTT}, {"AERON_CUBICCONGESTIONCONTROL_TCPMODE", &cc.TCPMode}} {
		if v := getenv(b.name); v != "" {
			x, err := strconv.ParseBool(strings.TrimSpace(v))
			if err != nil {
				return fmt.Errorf("%s=%q: not a boolean", b.name, v)
			}
			*b.dst = x
		}
	}
	if v := getenv("AERON_CUBICCONGESTIONCONTROL_INITIALRTT"); v != "" {
		d, err := ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("AERON_CUBICCONGESTIONCONTROL_INITIALRTT=%q: not a positive duration", v)
		}
		cc.InitialRTT = d
	}
	return nil
}

// congestionControl is an image's strategy
// (aeron_congestion_control_strategy_t). shouldMeasureRTT, onRTTMSent and
// onRTTM run on the receiver, onTrackRebuild on the conductor; what both
// read is atomic.
type congestionControl interface {
	shouldMeasureRTT(nowNs int64) bool
	onRTTMSent(nowNs int64)
	onRTTM(nowNs, rttNs int64)
	// onTrackRebuild returns the window to advertise and whether a status
	// message must go now; lossOccurred: a new gap was found.
	onTrackRebuild(nowNs, consumption, lastSMPosition int64, lossOccurred bool) (window int64, forceSM bool)
	initialWindow() int64
	close(c *conductor)
}

// checkCongestionControl validates cc= of a subscription channel.
func checkCongestionControl(u *uri.ChannelURI, channel string) (string, error) {
	v, ok := u.Get(uri.KeyCongestionControl)
	if !ok || v == "static" {
		return "static", nil
	}
	if v == "cubic" {
		return v, nil
	}
	return "", fail(cnc.ErrorCodeInvalidChannel, "%s: cc=%s: want static or cubic", channel, v)
}

// staticCC is aeron_static_window_congestion_control: the window is
// min(term length / 2, initial window), always.
type staticCC struct{ window int64 }

func (s staticCC) shouldMeasureRTT(int64) bool { return false }
func (s staticCC) onRTTMSent(int64)            {}
func (s staticCC) onRTTM(int64, int64)         {}
func (s staticCC) onTrackRebuild(int64, int64, int64, bool) (int64, bool) {
	return s.window, false
}
func (s staticCC) initialWindow() int64 { return s.window }
func (s staticCC) close(*conductor)     {}

// cubicCC is aeron_cubic_congestion_control: the congestion window cwnd
// counts sender MTUs; a new loss sets w_max = cwnd, K = cbrt(w_max*B/C) and
// cuts cwnd by B; otherwise, at most once per window update timeout,
// cwnd = min(max_cwnd, w_max + C*(t-K)^3) with t the seconds since the
// last loss (and, in TCP mode, at least w_max*(1-B) + 3B/(2-B)*t/RTT).
type cubicCC struct {
	tcpMode, measureRTT bool
	mtu                 int64
	maxCwnd, cwnd, wMax int64
	k                   float64
	initialRTTNs        int64
	windowUpdateNs      int64
	lastLossNs          int64
	lastUpdateNs        int64
	rttNs               atomic.Int64 // receiver writes, conductor reads (TCP mode)
	// receiver
	lastRTTNs, rttTimeoutNs int64

	rttID, wndID   int32
	rttCtr, wndCtr *atomic.Int64 // rcv-cc-cubic-rtt, rcv-cc-cubic-wnd (nil in unit tests)
}

// newCubic sizes the controller as aeron_cubic_congestion_control_strategy_supplier:
// the maximum window is min(term length / 2, initial window), the
// initial cwnd min(10, max_cwnd) MTUs, and w_max starts at max_cwnd (the
// concave region, as if just after a loss at nowNs).
func newCubic(cfg CubicConfig, termLength, initialWindow, mtu, nowNs int64) *cubicCC {
	c := &cubicCC{tcpMode: cfg.TCPMode, measureRTT: cfg.MeasureRTT, mtu: mtu, rttID: -1, wndID: -1}
	c.initialRTTNs = cubicInitialRTTDefault.Nanoseconds()
	if cfg.InitialRTT > 0 {
		c.initialRTTNs = cfg.InitialRTT.Nanoseconds()
	}
	c.maxCwnd = min(termLength/2, initialWindow) / mtu
	c.cwnd = min(c.maxCwnd, cubicInitCwnd)
	c.wMax = c.maxCwnd
	c.k = math.Cbrt(float64(c.wMax) * cubicB / cubicC)
	c.rttNs.Store(c.initialRTTNs)
	c.windowUpdateNs = c.initialRTTNs
	c.rttTimeoutNs = c.initialRTTNs * cubicRTTTimeoutMultiple
	c.lastLossNs, c.lastUpdateNs = nowNs, nowNs
	return c
}

func (c *cubicCC) initialWindow() int64 { return c.cwnd * c.mtu }

func (c *cubicCC) shouldMeasureRTT(nowNs int64) bool {
	return c.measureRTT && c.lastRTTNs+c.rttTimeoutNs-nowNs < 0
}

func (c *cubicCC) onRTTMSent(nowNs int64) { c.lastRTTNs = nowNs }

// onRTTM takes a measured round trip; the next measurement is due after
// max(rtt, initial rtt) x 4.
func (c *cubicCC) onRTTM(nowNs, rttNs int64) {
	c.lastRTTNs = nowNs
	c.rttNs.Store(rttNs)
	if c.rttCtr != nil {
		c.rttCtr.Store(rttNs)
	}
	c.rttTimeoutNs = max(rttNs, c.initialRTTNs) * cubicRTTTimeoutMultiple
}

func (c *cubicCC) onTrackRebuild(nowNs, consumption, lastSMPosition int64, lossOccurred bool) (int64, bool) {
	force := false
	switch {
	case lossOccurred:
		force = true
		c.wMax = c.cwnd
		c.k = math.Cbrt(float64(c.wMax) * cubicB / cubicC)
		c.cwnd = max(1, int64(float64(c.cwnd)*(1-cubicB)))
		c.lastLossNs = nowNs
	case c.cwnd < c.maxCwnd && c.lastUpdateNs+c.windowUpdateNs-nowNs < 0:
		t := float64(nowNs-c.lastLossNs) / 1e9
		d := t - c.k
		c.cwnd = min(c.maxCwnd, c.wMax+int64(cubicC*d*d*d))
		if c.tcpMode && c.cwnd < c.wMax {
			rtt := float64(c.rttNs.Load()) / 1e9
			wTCP := float64(c.wMax)*(1-cubicB) + 3*cubicB/(2-cubicB)*(t/rtt)
			// capped at max_cwnd, which the C driver's TCP region can
			// pass: a window over half a term breaks the overrun margin
			c.cwnd = min(c.maxCwnd, max(c.cwnd, int64(wTCP)))
		}
		c.lastUpdateNs = nowNs
	case c.cwnd == 1 && consumption > lastSMPosition:
		force = true
	}
	w := c.cwnd * c.mtu
	if c.wndCtr != nil {
		c.wndCtr.Store(w)
	}
	return w, force
}

func (c *cubicCC) close(cd *conductor) {
	for _, id := range []int32{c.rttID, c.wndID} {
		if id >= 0 {
			_ = cd.counters.Free(id)
		}
	}
	c.rttID, c.wndID = -1, -1
}

// newCongestionControl makes the image's strategy from the endpoint's cc=
// and allocates cubic's rcv-cc-cubic-rtt and rcv-cc-cubic-wnd counters.
func (c *conductor) newCongestionControl(im *publicationImage, mtu int32) (congestionControl, error) {
	e := im.e
	if e.cc != "cubic" {
		return staticCC{window: min(im.termLength/2, e.rcvWnd)}, nil
	}
	cc := newCubic(c.cfg.Cubic, im.termLength, e.rcvWnd, int64(mtu), c.nowNs)
	if cc.maxCwnd < 1 {
		return nil, fmt.Errorf("cc=cubic: window %d is less than one MTU (%d)", min(im.termLength/2, e.rcvWnd), mtu)
	}
	channel := e.imageChannel(im.streamID, im.sessionID)
	key := streamKey(c.keyBuf, im.regID, im.sessionID, im.streamID, channel)
	for _, a := range []struct {
		name string
		id   *int32
		ctr  **atomic.Int64
	}{{"rcv-cc-cubic-rtt", &cc.rttID, &cc.rttCtr}, {"rcv-cc-cubic-wnd", &cc.wndID, &cc.wndCtr}} {
		id, err := c.counters.Allocate(cnc.TypePerImage, key, streamLabel(a.name, im.regID, im.sessionID, im.streamID, channel, ""))
		if err != nil {
			cc.close(c)
			return nil, err
		}
		c.counters.SetRegistrationID(id, im.regID)
		*a.id, *a.ctr = id, c.counters.Value(id)
	}
	cc.rttCtr.Store(0)
	cc.wndCtr.Store(cc.initialWindow())
	return cc, nil
}

// initiateRTTM sends an RTT measurement request to the image's source(s)
// when its congestion control asks (aeron_publication_image_initiate_rttm).
// Receiver.
func (im *publicationImage) initiateRTTM(r *receiver) int {
	if !im.cc.shouldMeasureRTT(r.nowNs) {
		return 0
	}
	m := protocol.RTTMeasurement{FrameHeader: protocol.FrameHeader{Flags: protocol.RTTMFlagReply}, SessionID: im.sessionID,
		StreamID: im.streamID, EchoTimestamp: r.nowNs, ReceiverID: im.receiverID}
	n, _ := m.Encode(im.rttm[:])
	im.sendControl(r, im.rttm[:n])
	im.cc.onRTTMSent(r.nowNs)
	return 1
}
