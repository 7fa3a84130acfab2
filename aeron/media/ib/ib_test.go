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
