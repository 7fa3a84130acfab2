package driver

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/aeron/uri"
)

// NetworkConfig holds the sender and receiver settings of the network
// media that the C driver keeps in its context: multicast flow control,
// the receiver group tag and stream reliability. A plain value.
type NetworkConfig struct {
	// MulticastFlowControl is the strategy of multicast channels without
	// fc= (AERON_MULTICAST_FLOWCONTROL_SUPPLIER): "max" (default), "min"
	// or "tagged"; the C driver's names (multicast_max,
	// aeron_max_multicast_flow_control_strategy_supplier, ...) are accepted.
	MulticastFlowControl string
	// FlowControlReceiverTimeout drops a min/tagged receiver that sent no
	// status message for this long (AERON_MIN_MULTICAST_FLOW_CONTROL_RECEIVER_TIMEOUT).
	FlowControlReceiverTimeout time.Duration
	// FlowControlGroupTag is the tag tagged flow control follows without
	// g: (AERON_FLOW_CONTROL_GROUP_TAG, default -1).
	FlowControlGroupTag int64
	// FlowControlGroupMinSize is the number of receivers min/tagged flow
	// control waits for without g:/n (AERON_FLOW_CONTROL_GROUP_MIN_SIZE).
	FlowControlGroupMinSize int32
	// ReceiverGroupTag, when HasReceiverGroupTag, goes into every status
	// message of subscriptions without gtag= (AERON_RECEIVER_GROUP_TAG).
	ReceiverGroupTag    int64
	HasReceiverGroupTag bool
	// ReliableStream is the reliable= default of subscriptions
	// (AERON_RELIABLE_STREAM, default true): false fills gaps with
	// padding instead of NAKing them.
	ReliableStream bool
	// NakMulticastGroupSize and NakMulticastMaxBackoff shape the random
	// NAK delay of receivers with group semantics
	// (AERON_NAK_MULTICAST_GROUP_SIZE, default 10;
	// AERON_NAK_MULTICAST_MAX_BACKOFF, default 10 ms).
	NakMulticastGroupSize  int
	NakMulticastMaxBackoff time.Duration
	// NakUnicastDelay (AERON_NAK_UNICAST_DELAY, 100 µs; nak-delay= per
	// channel) and NakUnicastRetryRatio (AERON_NAK_UNICAST_RETRY_DELAY_RATIO,
	// 100) time the NAKs of images without group semantics.
	NakUnicastDelay      time.Duration
	NakUnicastRetryRatio int
	// MaxResend is the retransmit actions of a publication with group
	// semantics (AERON_MAX_RESEND, 16; max-resend= per channel, 1..256).
	MaxResend int
}

func defaultNetworkConfig() NetworkConfig {
	return NetworkConfig{MulticastFlowControl: "max", FlowControlReceiverTimeout: 5 * time.Second,
		FlowControlGroupTag: -1, ReliableStream: true,
		NakMulticastGroupSize: nakMulticastGroupSizeDefault, NakMulticastMaxBackoff: nakMulticastMaxBackoffDefault,
		NakUnicastDelay: nakUnicastDelayNs, NakUnicastRetryRatio: nakUnicastRetryRatio, MaxResend: maxResendDefault}
}

// fromEnv applies the AERON_* variables of the network config; the first
// malformed one is an error naming it.
func (n *NetworkConfig) fromEnv(getenv func(string) string) error {
	if v := getenv("AERON_MULTICAST_FLOWCONTROL_SUPPLIER"); v != "" {
		name, ok := flowControlName(v)
		if !ok {
			return fmt.Errorf("AERON_MULTICAST_FLOWCONTROL_SUPPLIER=%q: want max, min or tagged (or the C driver's supplier names)", v)
		}
		n.MulticastFlowControl = name
	}
	if v := getenv("AERON_MIN_MULTICAST_FLOW_CONTROL_RECEIVER_TIMEOUT"); v != "" {
		d, err := ParseDuration(v)
		if err != nil {
			return fmt.Errorf("AERON_MIN_MULTICAST_FLOW_CONTROL_RECEIVER_TIMEOUT=%q: %w", v, err)
		}
		n.FlowControlReceiverTimeout = d
	}
	if v := getenv("AERON_FLOW_CONTROL_GROUP_TAG"); v != "" {
		t, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return fmt.Errorf("AERON_FLOW_CONTROL_GROUP_TAG=%q: not an int64", v)
		}
		n.FlowControlGroupTag = t
	}
	if v := getenv("AERON_FLOW_CONTROL_GROUP_MIN_SIZE"); v != "" {
		s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil || s < 0 {
			return fmt.Errorf("AERON_FLOW_CONTROL_GROUP_MIN_SIZE=%q: not a non-negative int32", v)
		}
		n.FlowControlGroupMinSize = int32(s)
	}
	if v := getenv("AERON_RECEIVER_GROUP_TAG"); v != "" {
		t, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return fmt.Errorf("AERON_RECEIVER_GROUP_TAG=%q: not an int64", v)
		}
		n.ReceiverGroupTag, n.HasReceiverGroupTag = t, true
	}
	if v := getenv("AERON_NAK_MULTICAST_GROUP_SIZE"); v != "" {
		s, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || s < 1 {
			return fmt.Errorf("AERON_NAK_MULTICAST_GROUP_SIZE=%q: not a positive number", v)
		}
		n.NakMulticastGroupSize = s
	}
	if v := getenv("AERON_NAK_MULTICAST_MAX_BACKOFF"); v != "" {
		d, err := ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("AERON_NAK_MULTICAST_MAX_BACKOFF=%q: not a positive duration", v)
		}
		n.NakMulticastMaxBackoff = d
	}
	if v := getenv("AERON_NAK_UNICAST_DELAY"); v != "" {
		d, err := ParseDuration(v)
		if err != nil {
			return fmt.Errorf("AERON_NAK_UNICAST_DELAY=%q: %w", v, err)
		}
		n.NakUnicastDelay = d
	}
	if v := getenv("AERON_NAK_UNICAST_RETRY_DELAY_RATIO"); v != "" {
		r, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || r < 1 {
			return fmt.Errorf("AERON_NAK_UNICAST_RETRY_DELAY_RATIO=%q: not a positive number", v)
		}
		n.NakUnicastRetryRatio = r
	}
	if v := getenv("AERON_MAX_RESEND"); v != "" {
		r, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || r < 1 || r > uri.MaxResendMax {
			return fmt.Errorf("AERON_MAX_RESEND=%q: want 1..%d", v, uri.MaxResendMax)
		}
		n.MaxResend = r
	}
	if v := getenv("AERON_RELIABLE_STREAM"); v != "" {
		b, err := uri.ParseBool(v)
		if err != nil {
			return fmt.Errorf("AERON_RELIABLE_STREAM=%q: %w", v, err)
		}
		n.ReliableStream = b
	}
	return nil
}

// flowControlName maps a strategy name (URI or C supplier name) to
// "max", "min" or "tagged".
func flowControlName(s string) (string, bool) {
	switch strings.TrimSpace(s) {
	case "max", "multicast_max", "aeron_max_multicast_flow_control_strategy_supplier":
		return "max", true
	case "min", "multicast_min", "aeron_min_flow_control_strategy_supplier":
		return "min", true
	case "tagged", "multicast_tagged", "aeron_tagged_flow_control_strategy_supplier":
		return "tagged", true
	}
	return "", false
}

// Retransmit length caps in receiver windows (aeron_flow_control.h).
const (
	maxFlowControlRetransmitMultiple     = 4
	unicastFlowControlRetransmitMultiple = 16
	minFlowControlRetransmitMultiple     = 16
)

// flowControl is a sender flow control strategy
// (aeron_flow_control_strategy_t): it turns status messages into the
// sender limit. Owned by the sender duty of one publication.
type flowControl interface {
	// onStatusMessage returns the new sender limit after sm.
	onStatusMessage(sm *protocol.StatusMessage, sndLmt int64, initialTermID int32, bitsToShift int, nowNs int64) int64
	// onIdle runs when the sender sent nothing: receivers time out.
	onIdle(nowNs, sndLmt, sndPos int64) int64
	// onSetup runs when a SETUP goes out.
	onSetup(nowNs, sndLmt int64) int64
	// onTriggerSendSetup runs for an SM asking for a SETUP.
	onTriggerSendSetup(sm *protocol.StatusMessage)
	// hasRequiredReceivers: the group minimum is met (connected).
	hasRequiredReceivers() bool
	// onError: a receiver sent an ERR frame (it rejected the image);
	// min and tagged stop waiting for it (aeron_min_flow_control_strategy_on_error)
	onError(receiverID int64)
	// maxRetransmissionLength caps the length of one resend.
	maxRetransmissionLength(termOffset, resendLength, termLength, receiverWindow int64) int64
	close(c *conductor)
}

// newFlowControl picks the strategy of a publication
// (aeron_default_multicast_flow_control_strategy_supplier): unicast
// channels use unicast max whatever fc= says; multicast channels fc=, or
// the configured default.
func newFlowControl(c *conductor, u *uri.ChannelURI, multicast bool, regID int64, sessionID, streamID int32, channel string) (flowControl, error) {
	if !multicast {
		return &maxFlowControl{multiple: unicastFlowControlRetransmitMultiple}, nil
	}
	opts, err := parseFlowControl(u, c.cfg.Network)
	if err != nil {
		return nil, fail(cnc.ErrorCodeInvalidChannel, "%s: %v", channel, err)
	}
	if opts.name == "max" {
		return &maxFlowControl{multiple: maxFlowControlRetransmitMultiple}, nil
	}
	f := &minFlowControl{tagged: opts.name == "tagged", timeoutNs: opts.timeout.Nanoseconds(),
		groupTag: opts.groupTag, groupMinSize: int(opts.groupMinSize), lastSetupSndLmt: -1, counterID: -1}
	id, err := c.counters.Allocate(cnc.TypeFlowControlReceivers, streamKey(c.keyBuf, regID, sessionID, streamID, channel),
		streamLabel("fc-receivers", regID, sessionID, streamID, channel, ""))
	if err != nil {
		return nil, fail(cnc.ErrorCodeGenericError, "%v", err)
	}
	c.counters.SetRegistrationID(id, regID)
	f.counterID, f.counter = id, c.counters.Value(id)
	f.counter.Store(0)
	return f, nil
}

type flowControlOptions struct {
	name         string
	timeout      time.Duration
	groupTag     int64
	groupMinSize int32
}

// parseFlowControl reads fc=<name>[,g:<tag>[/<min>]][,t:<timeout>]
// (aeron_flow_control_parse_tagged_options): options the C driver would
// refuse are refused with its reason.
func parseFlowControl(u *uri.ChannelURI, n NetworkConfig) (flowControlOptions, error) {
	o := flowControlOptions{name: n.MulticastFlowControl, timeout: n.FlowControlReceiverTimeout,
		groupTag: n.FlowControlGroupTag, groupMinSize: n.FlowControlGroupMinSize}
	if o.name == "" {
		o.name = "max"
	}
	v, ok := u.Get(uri.KeyFlowControl)
	if !ok {
		return o, nil
	}
	parts := strings.Split(v, ",")
	name, ok := flowControlName(parts[0])
	if !ok || strings.HasPrefix(parts[0], "aeron_") || strings.HasPrefix(parts[0], "multicast_") {
		return o, fmt.Errorf("fc=%s: unknown flow control strategy %q (want max, min or tagged)", v, parts[0])
	}
	o.name = name
	for _, opt := range parts[1:] {
		if len(opt) <= 2 || opt[1] != ':' || (opt[0] != 'g' && opt[0] != 't') {
			return o, fmt.Errorf("fc=%s: unrecognised option %q (want g:<tag>[/<min>] or t:<timeout>)", v, opt)
		}
		val := opt[2:]
		if opt[0] == 't' {
			d, err := ParseDuration(val)
			if err != nil {
				return o, fmt.Errorf("fc=%s: invalid timeout %q: %v", v, opt, err)
			}
			o.timeout = d
			continue
		}
		tag, size, hasSize := strings.Cut(val, "/")
		if tag != "" {
			t, err := strconv.ParseInt(tag, 10, 64)
			if err != nil {
				return o, fmt.Errorf("fc=%s: invalid group tag %q", v, opt)
			}
			o.groupTag = t
		} else if !hasSize {
			return o, fmt.Errorf("fc=%s: invalid group %q", v, opt)
		}
		if hasSize {
			s, err := strconv.ParseInt(size, 10, 32)
			if err != nil || s < 0 {
				return o, fmt.Errorf("fc=%s: group count invalid in %q", v, opt)
			}
			o.groupMinSize = int32(s)
		}
	}
	return o, nil
}

// retransmissionLength is aeron_flow_control_calculate_retransmission_length:
// at most multiple receiver windows, and not past the end of the term.
func retransmissionLength(termOffset, resendLength, termLength, receiverWindow, multiple int64) int64 {
	toEnd := termLength - termOffset
	est := receiverWindow * multiple
	if toEnd < est {
		return min(toEnd, resendLength)
	}
	return min(est, resendLength)
}

// maxFlowControl is unicast and multicast max
// (aeron_max_flow_control_strategy_*): the fastest receiver sets the limit.
type maxFlowControl struct{ multiple int64 }

func (f *maxFlowControl) onStatusMessage(sm *protocol.StatusMessage, sndLmt int64, initialTermID int32, bitsToShift int, _ int64) int64 {
	pos := logbuffer.ComputePosition(sm.ConsumptionTermID, sm.ConsumptionTermOffset, bitsToShift, initialTermID)
	return max(sndLmt, pos+int64(sm.ReceiverWindow))
}
func (f *maxFlowControl) onIdle(_, sndLmt, _ int64) int64            { return sndLmt }
func (f *maxFlowControl) onSetup(_, sndLmt int64) int64              { return sndLmt }
func (f *maxFlowControl) onTriggerSendSetup(*protocol.StatusMessage) {}
func (f *maxFlowControl) hasRequiredReceivers() bool                 { return true }
func (f *maxFlowControl) onError(int64)                              {}
func (f *maxFlowControl) close(*conductor)                           {}
func (f *maxFlowControl) maxRetransmissionLength(off, n, term, window int64) int64 {
	return retransmissionLength(off, n, term, window, f.multiple)
}

type fcReceiver struct {
	lastPosition, lastPositionPlusWindow int64
	lastSMNs                             int64
	receiverID                           int64
	eos                                  bool
}

// minFlowControl is min and tagged (aeron_min_flow_control.c): the
// slowest tracked receiver sets the limit; receivers are tracked by
// receiver id, dropped after the receiver timeout or on EOS, and with
// tagged only status messages carrying the group tag count. Until
// groupMinSize receivers are tracked the limit does not move.
type minFlowControl struct {
	tagged          bool
	timeoutNs       int64
	groupTag        int64
	groupMinSize    int
	receivers       []fcReceiver
	setupTriggered  bool
	lastSetupNs     int64
	lastSetupSndLmt int64
	counterID       int32
	counter         *atomic.Int64
}

// matches is the tagged strategy's test (aeron_tagged_flow_control_strategy_on_sm).
func (f *minFlowControl) matches(sm *protocol.StatusMessage) bool {
	return !f.tagged || (sm.HasGroupTag && sm.GroupTag == f.groupTag)
}

func (f *minFlowControl) setupLimit(nowNs int64) int64 {
	if f.lastSetupSndLmt != -1 {
		if f.lastSetupNs+f.timeoutNs-nowNs < 0 {
			f.lastSetupSndLmt = -1
		} else {
			return f.lastSetupSndLmt
		}
	}
	return 1<<63 - 1
}

func (f *minFlowControl) setCount() {
	if f.counter != nil {
		f.counter.Store(int64(len(f.receivers)))
	}
}

func (f *minFlowControl) onStatusMessage(sm *protocol.StatusMessage, sndLmt int64, initialTermID int32, bitsToShift int, nowNs int64) int64 {
	pos := logbuffer.ComputePosition(sm.ConsumptionTermID, sm.ConsumptionTermOffset, bitsToShift, initialTermID)
	window := int64(sm.ReceiverWindow)
	eos := sm.Flags&protocol.SMFlagEOS != 0
	match := f.matches(sm)
	existing := false
	minPos := f.setupLimit(nowNs)
	for i := range f.receivers {
		r := &f.receivers[i]
		if match && r.receiverID == sm.ReceiverID {
			r.eos = eos
			r.lastPosition = max(r.lastPosition, pos)
			r.lastPositionPlusWindow = pos + window
			r.lastSMNs = nowNs
			existing = true
		}
		minPos = min(minPos, r.lastPositionPlusWindow)
	}
	if !existing && !eos && match && (len(f.receivers) == 0 || pos+window >= minPos-window) {
		f.receivers = append(f.receivers, fcReceiver{lastPosition: pos, lastPositionPlusWindow: pos + window,
			lastSMNs: nowNs, receiverID: sm.ReceiverID})
		minPos = min(minPos, pos+window)
		f.lastSetupSndLmt = -1
		f.setCount()
	}
	switch {
	case len(f.receivers) < f.groupMinSize:
		return sndLmt
	case len(f.receivers) == 0:
		return max(sndLmt, pos+window)
	default:
		return max(sndLmt, minPos)
	}
}

func (f *minFlowControl) onIdle(nowNs, sndLmt, _ int64) int64 {
	minPos := f.setupLimit(nowNs)
	n := len(f.receivers)
	for i := n - 1; i >= 0; i-- {
		r := &f.receivers[i]
		if r.lastSMNs+f.timeoutNs-nowNs < 0 || r.eos {
			f.receivers[i] = f.receivers[len(f.receivers)-1]
			f.receivers = f.receivers[:len(f.receivers)-1]
			continue
		}
		minPos = min(minPos, r.lastPositionPlusWindow)
	}
	if len(f.receivers) != n {
		f.setCount()
	}
	if len(f.receivers) < f.groupMinSize || len(f.receivers) == 0 {
		return sndLmt
	}
	return minPos
}

func (f *minFlowControl) onSetup(nowNs, sndLmt int64) int64 {
	if f.setupTriggered && len(f.receivers) > 0 {
		f.lastSetupNs, f.lastSetupSndLmt = nowNs, sndLmt
	}
	f.setupTriggered = false
	return sndLmt
}

func (f *minFlowControl) onTriggerSendSetup(sm *protocol.StatusMessage) {
	if !f.setupTriggered {
		f.setupTriggered = f.matches(sm)
	}
}

func (f *minFlowControl) hasRequiredReceivers() bool { return len(f.receivers) >= f.groupMinSize }

// onError marks the receiver as gone; onIdle drops it.
func (f *minFlowControl) onError(receiverID int64) {
	for i := range f.receivers {
		if f.receivers[i].receiverID == receiverID {
			f.receivers[i].eos = true
		}
	}
}

func (f *minFlowControl) maxRetransmissionLength(off, n, term, window int64) int64 {
	return retransmissionLength(off, n, term, window, minFlowControlRetransmitMultiple)
}

func (f *minFlowControl) close(c *conductor) {
	if f.counterID >= 0 {
		_ = c.counters.Free(f.counterID)
		f.counterID, f.counter = -1, nil
	}
}

// onStatusMessage is aeron_network_publication_on_status_message: the
// flow control strategy moves the sender limit (EOS status messages too:
// min and tagged drop the receiver), and the receiver liveness tracker
// adds or refreshes the receiver, or drops it on an EOS status message (a
// unicast one also ends the publication's linger).
func (p *networkPublication) onStatusMessage(c *sender, sm *protocol.StatusMessage) {
	if sm.Flags&protocol.SMFlagEOS != 0 {
		delete(p.receivers, sm.ReceiverID)
		if p.ep.mdc == nil && !p.dest.Addr().IsMulticast() {
			p.receivedUnicastEOS.Store(true)
		}
	} else {
		p.receivers[sm.ReceiverID] = c.nowNs
		p.shouldSendSetup = false
		p.hasInitialConnection = true
		if !p.responseConnected && p.params.responseCorrelationID != -1 && c.toConductor != nil {
			// the request image stops sending RSP_SETUP (a request
			// publication's id names a subscription, which no image has)
			cd, id := c.conductor, p.params.responseCorrelationID
			p.responseConnected = c.toConductor.tryOffer(func() { cd.onResponseConnected(id) })
		}
	}
	p.hasReceivers.Store(len(p.receivers) > 0)
	p.setSenderLimit(p.fc.onStatusMessage(sm, p.senderLimit, p.initialTermID, p.positionBitsToShift, c.nowNs))
	p.requiredReceivers.Store(p.fc.hasRequiredReceivers())
}

// flowControlIdle lets the strategy time receivers out when nothing was
// sent (the on_idle call of aeron_network_publication_send).
func (p *networkPublication) flowControlIdle(c *sender) {
	p.setSenderLimit(p.fc.onIdle(c.nowNs, p.senderLimit, p.senderPosition))
	p.requiredReceivers.Store(p.fc.hasRequiredReceivers())
}

// expireReceivers drops receivers silent for the connection timeout
// (aeron_network_publication_update_has_receivers).
func (p *networkPublication) expireReceivers(nowNs int64) {
	for id, last := range p.receivers {
		if last <= nowNs-p.connTimeoutNs {
			delete(p.receivers, id)
		}
	}
	p.hasReceivers.Store(len(p.receivers) > 0)
}

func (p *networkPublication) setSenderLimit(lim int64) {
	if lim != p.senderLimit {
		p.senderLimit = lim
		p.sndLmt.Store(lim)
	}
}

// setGroupTag takes the receiver group tag from gtag= or the driver's
// AERON_RECEIVER_GROUP_TAG (aeron_receive_channel_endpoint's group_tag).
func (e *receiveEndpoint) setGroupTag(u *uri.ChannelURI, n NetworkConfig) error {
	e.groupTag, e.hasGroupTag = n.ReceiverGroupTag, n.HasReceiverGroupTag
	if v, ok := u.Get(uri.KeyGroupTag); ok {
		t, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fail(cnc.ErrorCodeInvalidChannel, "gtag=%s: not an int64", v)
		}
		e.groupTag, e.hasGroupTag = t, true
	}
	return nil
}
