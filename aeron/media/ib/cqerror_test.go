package ib

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestUDCQFailureBookkeeping: an injected poll failure on a UD transport is
// counted and reported once with the cause, later polls do not touch the
// failed CQ, sends are dropped as on an unconnected path until the rebuild,
// and a rebuild that must wait (rebuildAt) does nothing yet. No device:
// the transport has no CQ at all, so a poll of it would panic.
func TestUDCQFailureBookkeeping(t *testing.T) {
	m := New()
	var got []string
	m.SetErrorHandler(func(err error) { got = append(got, err.Error()) })
	tr := &transport{m: m, kind: kindDial, connect: netip.MustParseAddrPort("10.0.0.9:24601")}
	FailNextPoll(tr)
	err := tr.reap()
	require.ErrorIs(t, err, errInjected)
	require.True(t, tr.cqFailed)
	require.ErrorIs(t, tr.reap(), errCQFailed, "the failed CQ is not polled again")
	require.EqualValues(t, 1, m.CQErrors.Load())
	require.Equal(t, []string{"ib: the CQ of UD endpoint to 10.0.0.9:24601 failed (poll: injected CQ failure (test hook)); it resolves its subscription again with a new QP and CQ"}, got)

	tr.ready.Store(true) // a CQ failure drops sends even on a ready endpoint
	n, err := tr.Send(netip.AddrPort{}, [][]byte{make([]byte, 64), make([]byte, 64)})
	require.NoError(t, err)
	require.Equal(t, 2, n, "dropped as on an unconnected path")
	tr.ready.Store(false)

	tr.kind, tr.bind = kindListen, netip.MustParseAddrPort("10.0.0.1:24601")
	tr.rebuildAt = time.Now().Add(time.Hour).UnixNano()
	n, err = tr.Recv(16, nil)
	require.NoError(t, err)
	require.Zero(t, n)
	require.True(t, tr.cqFailed, "not rebuilt before rebuildAt")
	require.Zero(t, m.CQRebuilds.Load())
	require.Equal(t, "10.0.0.1:24601", tr.describe())
	tr.kind = kindGroup
	tr.group = groupArgs{local: netip.MustParseAddr("10.0.0.1"), bind: netip.MustParseAddrPort("239.1.7.1:24581")}
	require.Equal(t, "239.1.7.1:24581 on 10.0.0.1", tr.describe())
}

// TestRCSharedFailureBookkeeping: the same for an ib-qp=rc subscription's
// shared CQ: counted once, reported once, not polled again, its sends
// dropped until Recv rebuilds, and the rebuild waits for rebuildAt.
func TestRCSharedFailureBookkeeping(t *testing.T) {
	m := New()
	var got []string
	m.SetErrorHandler(func(err error) { got = append(got, err.Error()) })
	tr := &rcTransport{m: m, local: "10.0.0.1:24603", evc: make(chan rcEvent, 1)}
	FailNextPoll(tr)
	err := tr.poll(tr.cq, nil)
	require.ErrorIs(t, err, errInjected)
	require.True(t, tr.sharedFailed)
	require.ErrorIs(t, tr.poll(tr.cq, nil), errCQFailed, "the failed CQ is not polled again")
	require.EqualValues(t, 1, m.RC.CQErrors.Load())
	require.Equal(t, []string{"ib: rc poll the shared CQ of 10.0.0.1:24603 failed: injected CQ failure (test hook); its connections are dropped and its shared CQ and receive queue rebuilt (its publications dial again)"}, got)
	tr.sharedFailure("poll the shared CQ", errors.New("again"))
	require.Len(t, got, 1, "reported once per failure")

	n, err := tr.Send(netip.MustParseAddrPort("10.0.0.2:40000"), [][]byte{make([]byte, 64)})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.EqualValues(t, 1, m.RC.Dropped.Load())

	tr.rebuildAt = time.Now().Add(time.Hour).UnixNano()
	n, err = tr.Recv(16, nil)
	require.NoError(t, err)
	require.Zero(t, n)
	require.True(t, tr.sharedFailed, "not rebuilt before rebuildAt")
	require.Zero(t, m.CQRebuilds.Load())

	var q rcShared
	require.NoError(t, q.close(), "closing nothing is fine")
	tr.retire()
	require.Empty(t, tr.retired, "nothing to retire")
}
