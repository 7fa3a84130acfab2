package ib

import (
	"testing"

	"github.com/stretchr/testify/require"
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
