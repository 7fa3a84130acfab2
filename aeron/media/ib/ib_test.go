package ib

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/driver"
)

func TestRingSize(t *testing.T) {
	require.Equal(t, 256, ringSize(128<<10, 1024, 0, 0))   // 2 × 128 datagrams
	require.Equal(t, minRing, ringSize(1024, 4096, 0, 0))  // tiny window: floor
	require.Equal(t, maxRing, ringSize(1<<30, 1024, 0, 0)) // huge window: ceiling
	require.Equal(t, 100, ringSize(128<<10, 1024, 100, 0)) // device WR limit
	require.Equal(t, 36, ringSize(128<<10, 1024, 0, 100))  // CQ shared with sendSlots
}

// TestRingFromReceiverWindow (issue 29): the UD receive ring is sized
// from the subscription's receiver window, not only so-rcvbuf: on a
// 4096-byte MTU port, rcv-wnd=8m gives 4096 buffers where the 128 KiB
// floor alone gave 64, which a burst overran silently.
func TestRingFromReceiverWindow(t *testing.T) {
	require.Equal(t, 64, ringSize(receiveWindow(driver.TransportParams{}), 4096, 0, 0), "no window given: the floor")
	require.Equal(t, 4096, ringSize(receiveWindow(driver.TransportParams{ReceiverWindow: 8 << 20}), 4096, 0, 0))
	require.Equal(t, 1024, ringSize(receiveWindow(driver.TransportParams{ReceiverWindow: 1 << 20, SocketRcvbuf: 2 << 20}), 4096, 0, 0),
		"so-rcvbuf when larger")
}

func TestCheckMTU(t *testing.T) {
	require.NoError(t, CheckMTU(1024, 1024))
	err := CheckMTU(1408, 1024)
	require.ErrorContains(t, err, "mtu 1408 is above the port's active MTU 1024: with ib-qp=ud an Aeron datagram is one IB message")
}

// TestErrorHandler: the medium reports through the handler the driver
// sets (driver.ErrorReporter), and reporting without one is a no-op.
func TestErrorHandler(t *testing.T) {
	m := New()
	m.report(errors.New("before any handler")) // must not panic
	var got []string
	m.SetErrorHandler(func(err error) { got = append(got, err.Error()) })
	m.report(errors.New("ib: resolve 10.0.0.9:1 by SIDR: timed out"))
	m.SetErrorHandler(nil)
	m.report(errors.New("after the handler was removed"))
	require.Equal(t, []string{"ib: resolve 10.0.0.9:1 by SIDR: timed out"}, got)
	var _ driver.ErrorReporter = m
}
