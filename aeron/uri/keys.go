package uri

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Keys understood by the Aeron C driver (aeron_uri.h) and ibgo's ib-qp.
const (
	KeyEndpoint                     = "endpoint"
	KeyInterface                    = "interface"
	KeyControl                      = "control"
	KeyControlMode                  = "control-mode"
	KeyTTL                          = "ttl"
	KeyTags                         = "tags"
	KeyAlias                        = "alias"
	KeyMTU                          = "mtu"
	KeyTermLength                   = "term-length"
	KeyInitialTermID                = "init-term-id"
	KeyTermID                       = "term-id"
	KeyTermOffset                   = "term-offset"
	KeySessionID                    = "session-id"
	KeyLinger                       = "linger"
	KeySparse                       = "sparse"
	KeyEOS                          = "eos"
	KeyTether                       = "tether"
	KeyRejoin                       = "rejoin"
	KeyReliable                     = "reliable"
	KeyGroup                        = "group"
	KeyGroupTag                     = "gtag"
	KeyFlowControl                  = "fc"
	KeyCongestionControl            = "cc"
	KeySocketSndbuf                 = "so-sndbuf"
	KeySocketRcvbuf                 = "so-rcvbuf"
	KeyReceiverWindow               = "rcv-wnd"
	KeyPublicationWindow            = "pub-wnd"
	KeyNakDelay                     = "nak-delay"
	KeyMaxResend                    = "max-resend"
	KeySpiesSimulateConnection      = "ssc"
	KeyUntetheredWindowLimitTimeout = "untethered-window-limit-timeout"
	KeyUntetheredRestingTimeout     = "untethered-resting-timeout"
	KeyUntetheredLingerTimeout      = "untethered-linger-timeout" // Aeron 1.53
	KeyResponseCorrelationID        = "response-correlation-id"
	KeyMediaRcvTimestampOffset      = "media-rcv-ts-offset"
	KeyChannelRcvTimestampOffset    = "channel-rcv-ts-offset"
	KeyChannelSndTimestampOffset    = "channel-snd-ts-offset"
	KeyATS                          = "ats"
	KeyStreamID                     = "stream-id"
	// KeyIBQueuePair selects the InfiniBand transport of aeron:ib: ud
	// (unreliable datagram, the default; unicast and multicast) or rc
	// (reliable connection; unicast only).
	KeyIBQueuePair = "ib-qp"
	// KeyIBMode selects how an ib-qp=rc publication moves its frames:
	// send (two-sided SEND/RECV, the default) or write (one-sided RDMA
	// WRITE straight into the subscriber's image; docs/aeron.md).
	KeyIBMode = "ib-mode"
)

// Values with a fixed meaning.
const (
	ControlModeManual   = "manual"
	ControlModeDynamic  = "dynamic"
	ControlModeResponse = "response"
	TimestampReserved   = "reserved" // *-ts-offset: write into the reserved value
	IBQueuePairUD       = "ud"
	IBQueuePairRC       = "rc"
	IBModeSend          = "send"
	IBModeWrite         = "write"
)

// Limits applied to values, from the Aeron C driver.
const (
	FrameAlignment   = 32
	DataHeaderLength = 32
	MaxUDPPayload    = 65504 // AERON_MAX_UDP_PAYLOAD_LENGTH
	TermMinLength    = 64 << 10
	TermMaxLength    = 1 << 30
	MaxResendMax     = 256 // AERON_RETRANSMIT_HANDLER_MAX_RESEND_MAX
	// IBUDMaxMTU is the largest message an InfiniBand unreliable-datagram QP
	// carries: the largest IB path MTU.
	IBUDMaxMTU = 4096
)

type mediaSet uint8

const (
	onUDP mediaSet = 1 << iota
	onIPC
	onIB
	network = onUDP | onIB
	all     = onUDP | onIPC | onIB
)

func (s mediaSet) has(m Media) bool {
	switch m {
	case MediaUDP:
		return s&onUDP != 0
	case MediaIPC:
		return s&onIPC != 0
	case MediaIB:
		return s&onIB != 0
	}
	return false
}

type keyInfo struct {
	media mediaSet
	check func(v string) string // returns the broken rule, or ""
}

var keys = map[string]keyInfo{
	KeyEndpoint:                     {network, checkEndpoint},
	KeyInterface:                    {network, checkInterface},
	KeyControl:                      {network, checkEndpoint},
	KeyControlMode:                  {all, checkOneOf(ControlModeManual, ControlModeDynamic, ControlModeResponse)},
	KeyTTL:                          {network, checkIntRange(0, 255)},
	KeyTags:                         {all, checkTags},
	KeyAlias:                        {all, func(string) string { return "" }},
	KeyMTU:                          {all, checkMTU},
	KeyTermLength:                   {all, checkTermLength},
	KeyInitialTermID:                {all, checkIntRange(math.MinInt32, math.MaxInt32)},
	KeyTermID:                       {all, checkIntRange(math.MinInt32, math.MaxInt32)},
	KeyTermOffset:                   {all, checkTermOffset},
	KeySessionID:                    {all, checkSessionID},
	KeyLinger:                       {all, checkDuration},
	KeySparse:                       {all, checkBool},
	KeyEOS:                          {all, checkBool},
	KeyTether:                       {all, checkBool},
	KeyRejoin:                       {all, checkBool},
	KeyReliable:                     {network, checkBool},
	KeyGroup:                        {network, checkOneOf("true", "false", "infer")},
	KeyGroupTag:                     {network, checkIntRange(math.MinInt64, math.MaxInt64)},
	KeyFlowControl:                  {network, checkFlowControl},
	KeyCongestionControl:            {network, checkOneOf("static", "cubic")},
	KeySocketSndbuf:                 {network, checkPositiveSize},
	KeySocketRcvbuf:                 {network, checkPositiveSize},
	KeyReceiverWindow:               {network, checkPositiveSize},
	KeyPublicationWindow:            {all, checkPositiveSize},
	KeyNakDelay:                     {network, checkDuration},
	KeyMaxResend:                    {network, checkIntRange(1, MaxResendMax)},
	KeySpiesSimulateConnection:      {all, checkBool},
	KeyUntetheredWindowLimitTimeout: {all, checkDuration},
	KeyUntetheredRestingTimeout:     {all, checkDuration},
	KeyUntetheredLingerTimeout:      {all, checkDuration},
	KeyResponseCorrelationID:        {all, checkResponseCorrelationID},
	KeyMediaRcvTimestampOffset:      {network, checkTimestampOffset},
	KeyChannelRcvTimestampOffset:    {network, checkTimestampOffset},
	KeyChannelSndTimestampOffset:    {network, checkTimestampOffset},
	KeyATS:                          {network, checkATS},
	KeyStreamID:                     {all, checkIntRange(math.MinInt32, math.MaxInt32)},
	KeyIBQueuePair:                  {onIB, checkOneOf(IBQueuePairUD, IBQueuePairRC)},
	KeyIBMode:                       {onIB, checkOneOf(IBModeSend, IBModeWrite)},
}

// Known reports whether key is one the given media understands.
func Known(m Media, key string) bool {
	k, ok := keys[key]
	return ok && k.media.has(m)
}

func checkOneOf(vals ...string) func(string) string {
	return func(v string) string {
		for _, x := range vals {
			if v == x {
				return ""
			}
		}
		return "must be one of " + strings.Join(vals, ", ")
	}
}

func checkIntRange(lo, hi int64) func(string) string {
	return func(v string) string {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < lo || n > hi {
			return fmt.Sprintf("must be an integer in %d..%d", lo, hi)
		}
		return ""
	}
}

func checkBool(v string) string {
	if _, err := ParseBool(v); err != nil {
		return "must be true or false"
	}
	return ""
}

func checkDuration(v string) string {
	if _, err := ParseDuration(v); err != nil {
		return "must be a duration: digits with an optional ns, us, ms or s suffix (nanoseconds without)"
	}
	return ""
}

func checkPositiveSize(v string) string {
	n, err := ParseSize(v)
	if err != nil || n <= 0 || n > math.MaxInt32 {
		return "must be a size in 1..2147483647 bytes: digits with an optional k, m or g suffix"
	}
	return ""
}

func checkEndpoint(v string) string {
	a, err := ParseAddress(v)
	if err != nil {
		return "must be host:port or [ipv6]:port: " + err.Error()
	}
	if !a.HasPort {
		return "needs a port: host:port or [ipv6]:port"
	}
	return ""
}

func checkInterface(v string) string {
	if _, err := ParseInterface(v); err != nil {
		return "must be address[:port][/prefix]: " + err.Error()
	}
	return ""
}

func checkTags(v string) string {
	parts := strings.Split(v, ",")
	if len(parts) > 2 {
		return "must be channelTag[,entityTag]"
	}
	for _, p := range parts {
		if p == "" {
			continue
		}
		if _, err := strconv.ParseInt(p, 10, 64); err != nil {
			return "must be channelTag[,entityTag], each an int64"
		}
	}
	if parts[0] == "" && (len(parts) == 1 || parts[1] == "") {
		return "must give a channel tag or an entity tag"
	}
	return ""
}

// checkMTU mirrors aeron_driver_context_validate_mtu_length.
func checkMTU(v string) string {
	n, err := ParseSize(v)
	rule := fmt.Sprintf("must be a multiple of %d (FRAME_ALIGNMENT) greater than the %d-byte data header and at most %d", FrameAlignment, DataHeaderLength, MaxUDPPayload)
	if err != nil || n <= DataHeaderLength || n > MaxUDPPayload || n%FrameAlignment != 0 {
		return rule
	}
	return ""
}

// checkTermLength mirrors aeron_logbuffer_check_term_length.
func checkTermLength(v string) string {
	n, err := ParseSize(v)
	if err != nil || n < TermMinLength || n > TermMaxLength || n&(n-1) != 0 {
		return fmt.Sprintf("must be a power of two from %d (64k) to %d (1g)", TermMinLength, TermMaxLength)
	}
	return ""
}

func checkTermOffset(v string) string {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > TermMaxLength || n%FrameAlignment != 0 {
		return fmt.Sprintf("must be a multiple of %d (FRAME_ALIGNMENT) from 0 to the term length", FrameAlignment)
	}
	return ""
}

func checkSessionID(v string) string {
	if t, ok := strings.CutPrefix(v, "tag:"); ok {
		if _, err := strconv.ParseInt(t, 10, 64); err != nil {
			return "must be an int32 or tag:<int64 tag>"
		}
		return ""
	}
	if _, err := strconv.ParseInt(v, 10, 32); err != nil {
		return "must be an int32 or tag:<int64 tag>"
	}
	return ""
}

func checkResponseCorrelationID(v string) string {
	if v == "prototype" {
		return ""
	}
	if _, err := strconv.ParseInt(v, 10, 64); err != nil {
		return "must be an int64 correlation id or prototype"
	}
	return ""
}

func checkTimestampOffset(v string) string {
	if v == TimestampReserved {
		return ""
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return "must be reserved or a non-negative payload offset"
	}
	return ""
}

func checkATS(v string) string {
	b, err := ParseBool(v)
	if err != nil {
		return "must be true or false"
	}
	if b {
		return "Aeron Transport Security is an Aeron Premium feature, not available in ibgo"
	}
	return ""
}

// checkFlowControl accepts max, min and tagged with Aeron's options:
// ,t:<timeout> and ,g:<tag>[/<min group size>] (aeron_flow_control.c).
func checkFlowControl(v string) string {
	const rule = "must be max, min or tagged, optionally followed by ,t:<timeout> and ,g:[<group tag>][/<min group size>]"
	parts := strings.Split(v, ",")
	switch parts[0] {
	case "max", "min", "tagged":
	default:
		return rule
	}
	for _, opt := range parts[1:] {
		switch {
		case strings.HasPrefix(opt, "t:"):
			if _, err := ParseDuration(opt[2:]); err != nil {
				return rule + ": bad timeout " + strconv.Quote(opt)
			}
		case strings.HasPrefix(opt, "g:"):
			tag, size, hasSize := strings.Cut(opt[2:], "/")
			if tag != "" {
				if _, err := strconv.ParseInt(tag, 10, 64); err != nil {
					return rule + ": bad group tag " + strconv.Quote(opt)
				}
			}
			if hasSize {
				if n, err := strconv.ParseInt(size, 10, 32); err != nil || n < 0 {
					return rule + ": bad group size " + strconv.Quote(opt)
				}
			}
			if tag == "" && !hasSize {
				return rule + ": empty g: option"
			}
		default:
			return rule + ": unknown option " + strconv.Quote(opt)
		}
	}
	return ""
}

// validate applies per-key rules to the keys the media knows, then the rules
// that relate keys to each other and to the media.
func (u *ChannelURI) validate(s string) error {
	fail := func(key, rule string) error {
		v, _ := u.Get(key)
		return &Error{URI: s, Key: key, Value: v, Index: -1, Rule: rule}
	}
	for _, p := range u.Params {
		k, ok := keys[p.Key]
		if !ok {
			continue
		}
		if !k.media.has(u.Media) {
			if p.Key == KeyIBQueuePair || p.Key == KeyIBMode {
				return fail(p.Key, fmt.Sprintf("%s applies only to aeron:ib, not aeron:%s", p.Key, u.Media))
			}
			continue // kept, as Aeron keeps keys a media ignores
		}
		if rule := k.check(p.Value); rule != "" {
			return fail(p.Key, rule)
		}
	}
	if u.Spy && u.Media == MediaIPC {
		return &Error{URI: s, Index: 0, Rule: "aeron-spy: spies on network publications; aeron:ipc publications are read directly"}
	}
	if u.Media == MediaIPC {
		return u.validateTermParams(fail)
	}

	// Network media: aeron_udp_channel_parse requires one of these.
	mode, hasMode := u.Get(KeyControlMode)
	if !u.Has(KeyEndpoint) && !u.Has(KeyControl) && !u.Has(KeyTags) && mode != ControlModeManual && mode != ControlModeResponse {
		return &Error{URI: s, Index: -1, Rule: fmt.Sprintf("aeron:%s URIs must specify endpoint, control, tags, or control-mode=manual/response", u.Media)}
	}
	if hasMode && mode == ControlModeDynamic && !u.Has(KeyControl) {
		return fail(KeyControlMode, "control-mode=dynamic needs an explicit control address")
	}
	if v, ok := u.Get(KeyEndpoint); ok {
		a, _ := ParseAddress(v)
		if a.Multicast() && !oddMulticast(a) {
			return fail(KeyEndpoint, "a multicast data address must be odd: its control address is the data address + 1")
		}
	}
	if err := u.validateTimestampOffsets(fail); err != nil {
		return err
	}
	if u.Media == MediaIB {
		qp, _ := u.Get(KeyIBQueuePair)
		if qp == "" {
			qp = IBQueuePairUD
		}
		if mode, _ := u.Get(KeyIBMode); mode == IBModeWrite && qp != IBQueuePairRC {
			return fail(KeyIBMode, "ib-mode=write needs ib-qp=rc: an RDMA WRITE goes over a reliable connection")
		}
		if qp == IBQueuePairRC && u.IsMulticast() {
			return fail(KeyEndpoint, "multicast needs ib-qp=ud: a reliable connection (ib-qp=rc) joins exactly two queue pairs")
		}
		if qp == IBQueuePairRC {
			for _, k := range []string{KeyControl, KeyControlMode} {
				if _, ok := u.Get(k); ok {
					return fail(k, "multi-destination-cast needs ib-qp=ud: a reliable connection (ib-qp=rc) joins exactly two queue pairs")
				}
			}
		}
		if v, ok := u.Get(KeyMTU); ok && qp == IBQueuePairUD {
			if n, _ := ParseSize(v); n > IBUDMaxMTU {
				return fail(KeyMTU, fmt.Sprintf("with ib-qp=ud an Aeron datagram is one IB message, at most the %d-byte path MTU; use ib-qp=rc for larger frames", IBUDMaxMTU))
			}
		}
	}
	return u.validateTermParams(fail)
}

func oddMulticast(a Address) bool {
	b := a.IP.AsSlice()
	return b[len(b)-1]&1 == 1
}

// validateTermParams checks what aeron_driver_uri_publication_params checks
// across keys: init-term-id, term-id and term-offset come together, the
// term offset fits the term, and pub-wnd sits between the MTU and half the
// term.
func (u *ChannelURI) validateTermParams(fail func(key, rule string) error) error {
	_, hasInit := u.Get(KeyInitialTermID)
	_, hasID := u.Get(KeyTermID)
	off, hasOff := u.Get(KeyTermOffset)
	if hasInit || hasID || hasOff {
		if !hasInit || !hasID || !hasOff {
			missing := KeyTermOffset
			if !hasInit {
				missing = KeyInitialTermID
			} else if !hasID {
				missing = KeyTermID
			}
			return fail(missing, "init-term-id, term-id and term-offset must be used as a complete set")
		}
		iv, _ := u.Get(KeyInitialTermID)
		tv, _ := u.Get(KeyTermID)
		init, _ := strconv.ParseInt(iv, 10, 32)
		id, _ := strconv.ParseInt(tv, 10, 32)
		if d := id - init; d > math.MaxInt32 || d < math.MinInt32 {
			return fail(KeyTermID, fmt.Sprintf("term-id - init-term-id = %d does not fit an int32", d))
		}
		if tl, ok := u.Get(KeyTermLength); ok {
			n, _ := ParseSize(tl)
			o, _ := strconv.ParseInt(off, 10, 64)
			if o > n {
				return fail(KeyTermOffset, fmt.Sprintf("must not exceed term-length=%d", n))
			}
		}
	}
	if pw, ok := u.Get(KeyPublicationWindow); ok {
		w, _ := ParseSize(pw)
		if mv, ok := u.Get(KeyMTU); ok {
			if m, _ := ParseSize(mv); w < m {
				return fail(KeyPublicationWindow, fmt.Sprintf("cannot be less than mtu=%d", m))
			}
		}
		if tl, ok := u.Get(KeyTermLength); ok {
			if n, _ := ParseSize(tl); w > n/2 {
				return fail(KeyPublicationWindow, fmt.Sprintf("must not exceed half of term-length=%d", n))
			}
		}
	}
	return nil
}

// validateTimestampOffsets mirrors aeron_udp_channel_parse's overlap check:
// two timestamps cannot share the reserved value or overlap in the payload.
func (u *ChannelURI) validateTimestampOffsets(fail func(key, rule string) error) error {
	ks := []string{KeyMediaRcvTimestampOffset, KeyChannelRcvTimestampOffset, KeyChannelSndTimestampOffset}
	for i := 0; i < len(ks); i++ {
		a, ok := u.Get(ks[i])
		if !ok {
			continue
		}
		for j := i + 1; j < len(ks); j++ {
			b, ok := u.Get(ks[j])
			if !ok {
				continue
			}
			overlap := a == TimestampReserved && b == TimestampReserved
			if a != TimestampReserved && b != TimestampReserved {
				x, _ := strconv.ParseInt(a, 10, 64)
				y, _ := strconv.ParseInt(b, 10, 64)
				overlap = x-y < 8 && y-x < 8
			}
			if overlap {
				// C's words (aeron_udp_channel_verify_timestamp_offsets_do_not_overlap)
				return fail(ks[j], fmt.Sprintf("%s and %s overlap: each timestamp takes 8 bytes", ks[i], ks[j]))
			}
		}
	}
	return nil
}

// Typed accessors. Each returns ok=false when the key is absent; values were
// validated by Parse or Validate.

// Size returns a size-valued key (mtu, term-length, so-rcvbuf …) in bytes.
func (u *ChannelURI) Size(key string) (int64, bool) {
	v, ok := u.Get(key)
	if !ok {
		return 0, false
	}
	n, err := ParseSize(v)
	return n, err == nil
}

// Bool returns a boolean key (sparse, eos, tether, reliable …).
func (u *ChannelURI) Bool(key string) (value, ok bool) {
	v, ok := u.Get(key)
	if !ok {
		return false, false
	}
	b, err := ParseBool(v)
	return b, err == nil
}

// Int returns an integer key (ttl, init-term-id, gtag, max-resend …).
func (u *ChannelURI) Int(key string) (int64, bool) {
	v, ok := u.Get(key)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// Endpoint returns the parsed endpoint address.
func (u *ChannelURI) Endpoint() (Address, bool) {
	v, ok := u.Get(KeyEndpoint)
	if !ok {
		return Address{}, false
	}
	a, err := ParseAddress(v)
	return a, err == nil
}

// IBQueuePair returns the QP type of an aeron:ib channel: "ud" unless ib-qp=rc.
func (u *ChannelURI) IBQueuePair() string {
	if v, ok := u.Get(KeyIBQueuePair); ok {
		return v
	}
	return IBQueuePairUD
}

// IBMode returns how an aeron:ib channel moves frames: "send" unless
// ib-mode=write.
func (u *ChannelURI) IBMode() string {
	if v, ok := u.Get(KeyIBMode); ok {
		return v
	}
	return IBModeSend
}

// Duration returns a duration-valued key (linger, nak-delay …) in nanoseconds.
func (u *ChannelURI) Duration(key string) (int64, bool) {
	v, ok := u.Get(key)
	if !ok {
		return 0, false
	}
	d, err := ParseDuration(v)
	return int64(d), err == nil
}
