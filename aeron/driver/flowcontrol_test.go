package driver

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/aeron/uri"
)

func TestParseFlowControl(t *testing.T) {
	def := defaultNetworkConfig()
	for fc, want := range map[string]flowControlOptions{
		"max":                 {name: "max", timeout: 5 * time.Second, groupTag: -1},
		"min":                 {name: "min", timeout: 5 * time.Second, groupTag: -1},
		"min,t:250ms":         {name: "min", timeout: 250 * time.Millisecond, groupTag: -1},
		"tagged,g:123":        {name: "tagged", timeout: 5 * time.Second, groupTag: 123},
		"tagged,g:123/3,t:1s": {name: "tagged", timeout: time.Second, groupTag: 123, groupMinSize: 3},
		"min,g:/2":            {name: "min", timeout: 5 * time.Second, groupTag: -1, groupMinSize: 2},
	} {
		u, err := uri.Parse("aeron:udp?endpoint=224.0.1.1:40456|fc=" + fc)
		require.NoError(t, err, fc)
		got, err := parseFlowControl(u, def)
		require.NoError(t, err, fc)
		require.Equal(t, want, got, fc)
	}
	for _, fc := range []string{"multicast_min", "min,x:1", "min,t:soon", "tagged,g:abc", "tagged,g:1/-2", "tagged,g:"} {
		u, err := uri.Parse("aeron:udp?endpoint=224.0.1.1:40456|fc=" + fc)
		if err != nil {
			continue // refused by the URI layer already
		}
		_, err = parseFlowControl(u, def)
		require.Error(t, err, fc)
		require.Contains(t, err.Error(), "fc=", fc)
	}
	u, _ := uri.Parse("aeron:udp?endpoint=224.0.1.1:40456")
	def.MulticastFlowControl = "min"
	got, err := parseFlowControl(u, def)
	require.NoError(t, err)
	require.Equal(t, "min", got.name, "the configured default applies without fc=")
}

func TestNetworkConfigFromEnv(t *testing.T) {
	env := map[string]string{
		"AERON_MULTICAST_FLOWCONTROL_SUPPLIER":              "aeron_min_flow_control_strategy_supplier",
		"AERON_MIN_MULTICAST_FLOW_CONTROL_RECEIVER_TIMEOUT": "2s",
		"AERON_FLOW_CONTROL_GROUP_TAG":                      "7",
		"AERON_FLOW_CONTROL_GROUP_MIN_SIZE":                 "2",
		"AERON_RECEIVER_GROUP_TAG":                          "9",
		"AERON_RELIABLE_STREAM":                             "false",
		"AERON_NAK_UNICAST_DELAY":                           "50us",
		"AERON_NAK_UNICAST_RETRY_DELAY_RATIO":               "3",
		"AERON_MAX_RESEND":                                  "4",
	}
	c, err := ConfigFromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, NetworkConfig{MulticastFlowControl: "min", FlowControlReceiverTimeout: 2 * time.Second, FlowControlGroupTag: 7,
		FlowControlGroupMinSize: 2, ReceiverGroupTag: 9, HasReceiverGroupTag: true, ReliableStream: false,
		NakMulticastGroupSize: 10, NakMulticastMaxBackoff: 10 * time.Millisecond,
		NakUnicastDelay: 50 * time.Microsecond, NakUnicastRetryRatio: 3, MaxResend: 4}, c.Network)
	env["AERON_MULTICAST_FLOWCONTROL_SUPPLIER"] = "fastest"
	_, err = ConfigFromEnv(func(k string) string { return env[k] })
	require.ErrorContains(t, err, "AERON_MULTICAST_FLOWCONTROL_SUPPLIER")
}

// sm builds a status message at position pos (initial term 0, 64 KiB terms).
func sm(receiverID, pos int64, window int32, tag *int64, flags uint8) *protocol.StatusMessage {
	m := &protocol.StatusMessage{FrameHeader: protocol.FrameHeader{Flags: flags}, ConsumptionTermID: int32(pos >> 16),
		ConsumptionTermOffset: int32(pos & 0xFFFF), ReceiverWindow: window, ReceiverID: receiverID}
	if tag != nil {
		m.GroupTag, m.HasGroupTag = *tag, true
	}
	return m
}

func TestMaxFlowControlFastestWins(t *testing.T) {
	f := &maxFlowControl{multiple: maxFlowControlRetransmitMultiple}
	lim := f.onStatusMessage(sm(1, 1000, 100, nil, 0), 0, 0, 16, 0)
	require.EqualValues(t, 1100, lim)
	lim = f.onStatusMessage(sm(2, 500, 100, nil, 0), lim, 0, 16, 0)
	require.EqualValues(t, 1100, lim, "a slower receiver does not hold back max")
	require.EqualValues(t, 400, f.maxRetransmissionLength(0, 1000, 1<<16, 100))
	require.EqualValues(t, 36, f.maxRetransmissionLength(1<<16-36, 1000, 1<<16, 100), "not past the end of the term")
}

func TestMinFlowControlSlowestWinsAndTimesOut(t *testing.T) {
	f := &minFlowControl{timeoutNs: int64(time.Second), groupTag: -1, lastSetupSndLmt: -1, counterID: -1}
	lim := f.onStatusMessage(sm(1, 1000, 100, nil, 0), 0, 0, 16, 0)
	require.EqualValues(t, 1100, lim)
	// A second receiver behind the first (but within a window of the
	// minimum) joins and from then on holds the limit.
	lim = f.onStatusMessage(sm(2, 950, 100, nil, 0), lim, 0, 16, 10)
	require.Len(t, f.receivers, 2)
	require.EqualValues(t, 1100, lim, "the limit never moves backwards")
	lim = f.onStatusMessage(sm(1, 5000, 100, nil, 0), lim, 0, 16, 20)
	require.EqualValues(t, 1100, lim, "receiver 2 at 950+100 holds the limit although receiver 1 is far ahead")
	require.EqualValues(t, 1050, f.onIdle(30, lim, lim))
	// Receiver 2 stops sending status messages: after the timeout it is
	// dropped and receiver 1 sets the limit.
	lim = f.onStatusMessage(sm(1, 6000, 100, nil, 0), lim, 0, 16, int64(time.Second))
	require.EqualValues(t, 6100, f.onIdle(int64(time.Second)+20, lim, lim))
	require.Len(t, f.receivers, 1)
	// EOS from receiver 1 removes it at the next idle.
	f.onStatusMessage(sm(1, 6000, 100, nil, protocol.SMFlagEOS), 6100, 0, 16, int64(time.Second)+30)
	f.onIdle(int64(time.Second)+40, 6100, 6100)
	require.Empty(t, f.receivers)
}

func TestTaggedFlowControlGroup(t *testing.T) {
	tag, other := int64(42), int64(7)
	f := &minFlowControl{tagged: true, timeoutNs: int64(time.Second), groupTag: tag, groupMinSize: 2, lastSetupSndLmt: -1, counterID: -1}
	lim := f.onStatusMessage(sm(1, 1000, 100, &tag, 0), 0, 0, 16, 0)
	require.Zero(t, lim, "one tagged receiver of a group of two: the limit holds")
	require.False(t, f.hasRequiredReceivers())
	lim = f.onStatusMessage(sm(2, 1000, 100, &other, 0), lim, 0, 16, 0)
	lim = f.onStatusMessage(sm(3, 1000, 100, nil, 0), lim, 0, 16, 0)
	require.Zero(t, lim, "untagged and differently tagged receivers do not count")
	require.Len(t, f.receivers, 1)
	lim = f.onStatusMessage(sm(4, 1200, 100, &tag, 0), lim, 0, 16, 0)
	require.True(t, f.hasRequiredReceivers())
	require.EqualValues(t, 1100, lim, "two tagged receivers: the slower one sets the limit")
}

func TestOptimalMulticastNakDelay(t *testing.T) {
	d := newOptimalDelay(10, 10_000_000)
	sum := int64(0)
	for range 10000 {
		v := d.next()
		require.GreaterOrEqual(t, v, int64(0))
		require.LessOrEqual(t, v, int64(10_000_000))
		sum += v
	}
	// The distribution leans to long delays (most receivers wait for the
	// first NAK to be answered): its mean is T(1 - 1/λ + 1/(e^λ-1)) ≈ 0.735 T
	// for a group of 10 (about 7.35 ms).
	mean := sum / 10000
	require.InDelta(t, 7_350_000, mean, 400_000)
	e := &receiveEndpoint{multicastDelay: d, group: -1, nakDelayNs: nakUnicastDelayNs, nakRetryNs: nakUnicastDelayNs * nakUnicastRetryRatio}
	im := &publicationImage{e: e}
	require.EqualValues(t, nakUnicastDelayNs, im.nakDelay(false))
	require.EqualValues(t, nakUnicastDelayNs*nakUnicastRetryRatio, im.nakDelay(true))
	require.False(t, e.imageGroup(0), "unicast endpoint, plain SETUP")
	require.True(t, e.imageGroup(protocol.SetupFlagGroup), "infer: the SETUP's GROUP flag")
	e.control = netip.MustParseAddrPort("224.0.1.2:40456")
	require.True(t, e.imageGroup(0), "infer: a multicast endpoint")
	for ch, want := range map[string]int8{"aeron:udp?endpoint=224.0.1.1:1": -1, "aeron:udp?endpoint=224.0.1.1:1|group=false": 0,
		"aeron:udp?endpoint=127.0.0.1:1|group=true": 1, "aeron:udp?endpoint=127.0.0.1:1|group=infer": -1} {
		u, err := uri.Parse(ch)
		require.NoError(t, err)
		require.Equal(t, want, groupParam(u), ch)
	}
	e.group = 0
	require.False(t, e.imageGroup(protocol.SetupFlagGroup), "group=false wins")
	im.group = true
	require.LessOrEqual(t, im.nakDelay(true), int64(10_000_000), "group: the random backoff, retry or not")
}

func TestRetransmitHandler(t *testing.T) {
	uni := newRetransmitHandler(false, 16)
	a, _ := uni.claim(5, 0)
	require.NotNil(t, a)
	uni.linger(a, 5, 0, 1024, 100)
	a, _ = uni.claim(5, 512)
	require.Nil(t, a, "a NAK starting inside the lingering range is absorbed")
	a, _ = uni.claim(5, 2048)
	require.NotNil(t, a, "unicast: a NAK elsewhere replaces the single action")
	uni.linger(a, 5, 2048, 1024, 100)
	uni.processTimeouts(101)
	a, _ = uni.claim(5, 2048)
	require.NotNil(t, a, "the linger is over")

	grp := newRetransmitHandler(true, maxResendDefault)
	for i := range maxResendDefault {
		a, overflow := grp.claim(1, int32(i*4096))
		require.NotNil(t, a)
		require.False(t, overflow)
		grp.linger(a, 1, int32(i*4096), 1024, 50)
	}
	a, overflow := grp.claim(1, 1<<20)
	require.Nil(t, a)
	require.True(t, overflow, "every action busy: overflow")
	a, overflow = grp.claim(1, 4096+100)
	require.Nil(t, a)
	require.False(t, overflow, "inside a lingering range: absorbed, not an overflow")
	grp.processTimeouts(51)
	require.Zero(t, grp.active)
}
