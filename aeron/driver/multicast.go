package driver

import (
	"net/netip"

	"github.com/ibgo/ibgo/aeron/cnc"
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
