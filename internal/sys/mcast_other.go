//go:build !linux

package sys

import (
	"net/netip"
	"syscall"
)

// Multicast is the multicast configuration of a UDP socket (Linux only).
type Multicast struct {
	Group   netip.Addr
	IfAddr  netip.Addr
	IfIndex int
	TTL     int
}

// SetMulticast is Linux only.
func SetMulticast(rc syscall.RawConn, m Multicast) error { return ErrNotSupportedOnOS }
