package cm

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/uverbs"
)

// Arguments the kernel would refuse less clearly are refused before any
// command is written (these run without a device).
func TestUDArgumentChecks(t *testing.T) {
	ctx := context.Background()
	_, err := OpenUD(ctx, "0.0.0.0:7000", nil)
	require.ErrorContains(t, err, "needs a specific local IP")
	_, err = OpenUD(ctx, "not-an-address", nil)
	require.Error(t, err)
	_, _, err = DialUD(ctx, "10.0.0.1:x", nil)
	require.Error(t, err)

	var e UDEndpoint
	_, err = e.JoinMulticast(ctx, "10.0.0.1", nil)
	require.ErrorContains(t, err, "not a multicast address")
	_, err = e.JoinMulticast(ctx, "239.1.1.1:5", nil)
	require.ErrorContains(t, err, "not an IP address")
	_, err = e.Resolve(ctx, make([]byte, 181))
	require.ErrorContains(t, err, "at most 180")
	_, err = (&ID{}).SIDR(ctx, nil)
	require.ErrorContains(t, err, "not a UD id", "SIDR from an RC id")

	r := &SIDRRequest{}
	require.ErrorContains(t, r.AcceptQPN(1, make([]byte, 137)), "at most 136")
	require.ErrorContains(t, r.Reject(make([]byte, 137)), "at most 136")
}

func TestUDConstants(t *testing.T) {
	require.EqualValues(t, 0x01234567, UDPQKey)
	require.EqualValues(t, 0xFFFFFF, MulticastQPN)
	require.Equal(t, DefaultCap, (&UDOptions{}).cap())
	c := uverbs.QPCap{MaxSendWR: 3, MaxRecvWR: 5, MaxSendSGE: 1, MaxRecvSGE: 1}
	require.Equal(t, c, (&UDOptions{Cap: c}).cap())
}

// A SIDR reject reaches DialUD as ErrRefused with the server's data; no
// listener as ErrUnreachable with SIDR status 1 (the decoding is the core's
// eventErr; this pins what the UD API documents).
func TestSIDREventErrors(t *testing.T) {
	rej := eventErr("dial UD", &Event{Type: EventUnreachable, Status: SIDRReject, UD: true, UDP: UDParam{PrivateData: []byte("go away")}})
	require.ErrorIs(t, rej, ErrRefused)
	require.Equal(t, []byte("go away"), rej.(*Error).PrivateData)
	none := eventErr("dial UD", &Event{Type: EventUnreachable, Status: SIDRUnsupported, UD: true})
	require.ErrorIs(t, none, ErrUnreachable)
	require.NotErrorIs(t, none, ErrRefused)
	require.True(t, strings.Contains(none.Error(), "status 1"), none.Error())
	late := eventErr("dial UD", &Event{Type: EventUnreachable, Status: -110, UD: true})
	require.ErrorIs(t, late, ErrUnreachable)
	require.ErrorIs(t, late, ErrTimeout)
}

// A join's wait takes its own answer only (issue 30, item 5): the late
// answer of an abandoned join is dropped, another group's error and an
// ADDR_CHANGE that arrive meanwhile stay queued, in order, for their
// waiters; a wait that gives up leaves no drop entry behind, so the next
// join's answer is not swallowed (LEAVE_MCAST drops the abandoned group's
// events in the kernel); an error for the join's own group fails it.
func TestWaitJoinTakesOnlyItsAnswer(t *testing.T) {
	id := &ID{notify: make(chan struct{}, 1), closeCh: make(chan struct{})}
	id.push(&Event{Type: EventMulticastJoin, Handle: 7}) // abandoned join
	id.push(&Event{Type: EventMulticastError, Handle: 3, Status: -110})
	id.push(&Event{Type: EventAddrChange})
	id.push(&Event{Type: EventMulticastJoin, Handle: 9})
	ev, err := id.waitJoin(context.Background(), 9)
	require.NoError(t, err)
	require.Equal(t, uint32(9), ev.Handle)
	require.Len(t, id.queue, 2, "the other group's error and the ADDR_CHANGE are still queued")
	require.Equal(t, EventMulticastError, id.queue[0].Type)
	require.Equal(t, EventAddrChange, id.queue[1].Type)
	id.queue = nil

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = id.waitJoin(ctx, 11)
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, id.drop, "a join that gave up arms no drop entry")
	id.push(&Event{Type: EventMulticastJoin, Handle: 12})
	ev, err = id.waitJoin(context.Background(), 12)
	require.NoError(t, err, "the next join gets its answer")
	require.Equal(t, uint32(12), ev.Handle)

	id.push(&Event{Type: EventMulticastError, Handle: 13, Status: -110})
	_, err = id.waitJoin(context.Background(), 13)
	require.Error(t, err, "the join's own group failed")
}
