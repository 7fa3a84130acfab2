package ib

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSlotRegs: a region's in-flight bytes follow the slots that read it
// through take, free, freeAll and forget.
func TestSlotRegs(t *testing.T) {
	a, b := &memReg{budget: 100}, &memReg{budget: 100}
	s := newSlotRegs(4)
	require.False(t, s.take(0, a, 10))
	require.False(t, s.take(1, b, 20))
	require.True(t, s.take(2, a, 40), "half of a's bound in flight: signal")
	require.True(t, s.unsignalled)
	require.Equal(t, 50, a.inFlight)
	require.Equal(t, 20, b.inFlight)

	s.free(0)
	s.free(0) // a free slot frees nothing
	s.free(3)
	require.Equal(t, 40, a.inFlight)

	s.forget(b) // released: b's count no longer moves
	s.free(1)
	require.Equal(t, 20, b.inFlight)

	s.take(3, b, 5)
	s.freeAll()
	require.Zero(t, a.inFlight)
	require.Equal(t, 20, b.inFlight)
	require.False(t, s.unsignalled)
	require.Equal(t, []*memReg{nil, nil, nil, nil}, s.reg)
}
