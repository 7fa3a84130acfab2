package driver

import (
	"math"
	"math/rand/v2"
	"net/netip"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/aeron/uri"
)

// multicastControl is the control address of a multicast data group: the
// data address plus one, same port (aeron_multicast_control_address). Data
// addresses must be odd; aeron/uri refuses even ones before this runs.
func multicastControl(data netip.AddrPort) (netip.AddrPort, error) {
	b := data.Addr().AsSlice()
	if b[len(b)-1]&1 == 0 {
		return netip.AddrPort{}, fail(cnc.ErrorCodeInvalidChannel, "multicast data address %s must be odd (its control address is the next one)", data.Addr())
	}
	b[len(b)-1]++
	a, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(a, data.Port()), nil
}

// Multicast NAK timing (aeron_driver_context.c): a receiver with group
// semantics delays each NAK by a random time in [0, max backoff] drawn
// from the optimal feedback distribution for a group of the given size,
// so that one receiver's NAK (and the multicast retransmit) usually
// spares the others theirs (aeron_loss_detector_nak_multicast_delay_generator).
const (
	nakMulticastGroupSizeDefault  = 10         // AERON_NAK_MULTICAST_GROUP_SIZE
	nakMulticastMaxBackoffDefault = 10_000_000 // AERON_NAK_MULTICAST_MAX_BACKOFF, ns
)

// optimalDelay is aeron_feedback_delay_state_init's optimal_delay: the
// constants of delay = T/λ · ln(x · (e^λ − 1) · T/λ), x uniform in
// [λ/(T(e^λ − 1)), λ/T + λ/(T(e^λ − 1))], λ = ln(group size) + 1.
type optimalDelay struct {
	randMax, baseX, constantT, factorT float64
}

func newOptimalDelay(groupSize int, maxBackoffNs int64) optimalDelay {
	lambda := math.Log(float64(max(groupSize, 1))) + 1
	t := float64(maxBackoffNs)
	return optimalDelay{randMax: lambda / t, baseX: lambda / (t * (math.Exp(lambda) - 1)),
		constantT: t / lambda, factorT: (math.Exp(lambda) - 1) * (t / lambda)}
}

// next draws a delay in [0, max backoff] ns.
func (d optimalDelay) next() int64 {
	x := rand.Float64()*d.randMax + d.baseX
	return int64(d.constantT * math.Log(x*d.factorT))
}

// groupParam reads group= (aeron_inferable_boolean_t): 1 true, 0 false,
// -1 infer (the default).
func groupParam(u *uri.ChannelURI) int8 {
	v, ok := u.Get(uri.KeyGroup)
	if !ok || v == "infer" {
		return -1
	}
	if b, _ := uri.ParseBool(v); b {
		return 1
	}
	return 0
}

// imageGroup is aeron_driver_conductor_treat_image_as_multicast: group=
// as given, else (infer) a multicast endpoint or a SETUP with the GROUP
// flag (a publication with group semantics) makes the image a group one.
func (e *receiveEndpoint) imageGroup(setupFlags uint8) bool {
	if e.group >= 0 {
		return e.group == 1
	}
	return e.control.IsValid() || setupFlags&protocol.SetupFlagGroup != 0
}

// nakDelay is the loss detector's delay before a NAK (retry: before the
// next NAK of the same gap): static for unicast (100 µs, then × 100),
// the optimal random backoff for group semantics.
func (im *publicationImage) nakDelay(retry bool) int64 {
	if im.group {
		return im.e.multicastDelay.next()
	}
	if retry {
		return im.e.nakRetryNs
	}
	return im.e.nakDelayNs
}
