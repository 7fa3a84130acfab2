package ib

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/uverbs"
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

// TestRegionsMovedTo: logs registered on one PD are deregistered, and
// wait for registration on the new one, once the transport's PD is
// another (its device was removed); the same PD, no PD, or regions never
// registered are not a move.
func TestRegionsMovedTo(t *testing.T) {
	old, next := &uverbs.PD{}, &uverbs.PD{}
	rs := regions{regs: []*memReg{{budget: 100, inFlight: 40}, {budget: 100, failed: true}}}
	require.False(t, rs.movedTo(next), "never registered")
	rs.regsPD = old // as registerPending(old) leaves it
	require.False(t, rs.movedTo(old))
	require.False(t, rs.movedTo(nil))
	require.False(t, rs.regsPending)
	require.True(t, rs.movedTo(next))
	require.True(t, rs.regsPending, "the next Send registers the logs on the new PD")
	require.Nil(t, rs.regsPD)
	require.Zero(t, rs.regs[0].inFlight, "nothing is in flight on the removed device")
	require.False(t, rs.movedTo(next), "deregistered once")
}
