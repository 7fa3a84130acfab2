package ib

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A lost connection is parked, not disconnected, for LossGrace; a peer's
// disconnect is released at once; a publication dials again only after
// the grace (lostAt); parking twice is one drop.
func TestLossGrace(t *testing.T) {
	tr := &rcTransport{m: New(), connect: netip.MustParseAddrPort("10.0.0.2:4000"),
		byKey: map[uint32]*rcConn{}, byQPN: map[uint32]*rcConn{}, byAddr: map[netip.AddrPort]*rcConn{},
		redial: make(chan struct{}, 1), evc: make(chan rcEvent, 1)}
	lost := &rcConn{key: 1, addr: tr.connect}
	tr.byAddr[lost.addr], tr.cur = lost, lost
	before := time.Now().UnixNano()
	tr.fail(lost, "test")
	require.Equal(t, int64(1), tr.m.RC.Lost.Load())
	require.Len(t, tr.parked, 1, "a lost connection is parked")
	require.GreaterOrEqual(t, tr.lostAt.Load(), before, "the dial loop waits LossGrace from here")
	require.Nil(t, tr.cur)
	require.Len(t, tr.redial, 1, "the publication dials again")
	tr.fail(lost, "again")
	require.Len(t, tr.parked, 1, "dropped once")
	require.Equal(t, int64(1), tr.m.RC.Lost.Load(), "counted once")

	// inside the grace nothing is released
	tr.releaseParked(false)
	require.Len(t, tr.parked, 1)
	// once it is over (and no port is down: none is used here) it is
	tr.parked[0].parkedAt -= int64(LossGrace)
	tr.releaseParked(false)
	require.Empty(t, tr.parked)

	// a peer's disconnect: released at once, no grace for the next dial
	closed := &rcConn{key: 2, addr: tr.connect}
	tr.cur = closed
	tr.lostAt.Store(0)
	tr.disconnected(closed, &tr.m.RC.Disconnected)
	tr.apply(<-tr.evc)
	require.Empty(t, tr.parked, "a disconnected connection is not parked")
	require.Zero(t, tr.lostAt.Load())
}

// A publication's connection whose send slots all stay posted with no
// completion is lost after RCStallTimeout; a freed slot starts the clock
// again; a subscription's connections are never stalled out.
func TestRCStall(t *testing.T) {
	defer func(d time.Duration) { RCStallTimeout = d }(RCStallTimeout)
	RCStallTimeout = 50 * time.Millisecond
	tr := &rcTransport{m: New(), connect: netip.MustParseAddrPort("10.0.0.2:4000"),
		byKey: map[uint32]*rcConn{}, byQPN: map[uint32]*rcConn{}, byAddr: map[netip.AddrPort]*rcConn{},
		redial: make(chan struct{}, 1)}
	c := &rcConn{key: 1, addr: tr.connect, slotsN: 8}
	tr.cur = c
	require.False(t, tr.stalled(c), "the first short send starts the clock")
	require.False(t, tr.stalled(c))
	time.Sleep(60 * time.Millisecond)
	c.stallAt = 0 // a completion freed a slot (poll)
	require.False(t, tr.stalled(c))
	time.Sleep(60 * time.Millisecond)
	require.True(t, tr.stalled(c))
	require.Equal(t, int64(1), tr.m.RC.Stalled.Load())
	require.Equal(t, int64(1), tr.m.RC.Lost.Load())
	require.True(t, c.closing.Load())

	sub := &rcTransport{m: New()}
	sc := &rcConn{key: 1, slotsN: 8}
	sub.stalled(sc)
	time.Sleep(60 * time.Millisecond)
	require.False(t, sub.stalled(sc), "a subscription's connection is its publisher's to watch")
}
