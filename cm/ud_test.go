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
