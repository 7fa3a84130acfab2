package cnc

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFlyweightsRoundTrip(t *testing.T) {
	hdr := Correlated{ClientID: 7, CorrelationID: 9}
	pc := PublicationCommand{Correlated: hdr, StreamID: 1001, Channel: "aeron:ipc"}
	b := AppendPublicationCommand(nil, pc)
	require.Len(t, b, 24+len("aeron:ipc"), "24-byte fixed part")
	got, err := DecodePublicationCommand(CmdAddPublication, b)
	require.NoError(t, err)
	require.Equal(t, pc, got)

	sc := SubscriptionCommand{Correlated: hdr, RegistrationCorrelationID: -1, StreamID: 3, Channel: "aeron:ipc"}
	b = AppendSubscriptionCommand(nil, sc)
	require.Len(t, b, 32+len("aeron:ipc"), "32-byte fixed part")
	gs, err := DecodeSubscriptionCommand(CmdAddSubscription, b)
	require.NoError(t, err)
	require.Equal(t, sc, gs)

	cc := CounterCommand{Correlated: hdr, TypeID: 1001, Key: []byte{1, 2, 3}, Label: "lbl"}
	b = AppendCounterCommand(nil, cc)
	require.Len(t, b, 16+4+4+4+4+3, "key padded to 4")
	gc, err := DecodeCounterCommand(CmdAddCounter, b)
	require.NoError(t, err)
	require.Equal(t, cc, gc)
	cc.Static, cc.RegistrationID = true, 55
	gc, err = DecodeCounterCommand(CmdAddStaticCounter, AppendCounterCommand(nil, cc))
	require.NoError(t, err)
	require.Equal(t, cc, gc)

	rc, err := DecodeRemoveCommand(CmdRemovePublication, append(AppendRemoveCommand(nil, RemoveCommand{Correlated: hdr, RegistrationID: 4}), 1, 0, 0, 0, 0, 0, 0, 0))
	require.NoError(t, err)
	require.Equal(t, RemoveCommand{Correlated: hdr, RegistrationID: 4, Flags: 1}, rc, "1.53 32-byte form")

	pr := PublicationReady{CorrelationID: 1, RegistrationID: 2, SessionID: 3, StreamID: 4, PublicationLimitCounterID: 5, ChannelStatusIndicatorID: -1, LogFile: "/x/1.logbuffer"}
	b = AppendPublicationReady(nil, pr)
	require.Len(t, b, 36+len(pr.LogFile), "36-byte fixed part")
	gp, err := DecodePublicationReady(RspOnPublicationReady, b)
	require.NoError(t, err)
	require.Equal(t, pr, gp)

	ir := ImageReady{CorrelationID: 1, SessionID: 2, StreamID: 3, SubscriptionRegistrationID: 4, SubscriberPositionID: 5, LogFile: "/x/1.logbuffer", SourceIdentity: "aeron:ipc"}
	b = AppendImageReady(nil, ir)
	require.Equal(t, 32+16, len(b)-len(ir.SourceIdentity)-4, "source identity at a 4-aligned offset")
	gi, err := DecodeImageReady(b)
	require.NoError(t, err)
	require.Equal(t, ir, gi)

	er := ErrorResponse{OffendingCorrelationID: 8, Code: ErrorCodeInvalidChannel, Message: "bad"}
	ge, err := DecodeErrorResponse(AppendErrorResponse(nil, er))
	require.NoError(t, err)
	require.Equal(t, er, ge)

	iu := ImageUnavailable{CorrelationID: 1, SubscriptionRegistrationID: 2, StreamID: 3, Channel: "aeron:ipc"}
	gu, err := DecodeImageUnavailable(AppendImageUnavailable(nil, iu))
	require.NoError(t, err)
	require.Equal(t, iu, gu)
}

func TestFlyweightsRejectTruncated(t *testing.T) {
	b := AppendPublicationCommand(nil, PublicationCommand{Channel: "aeron:ipc"})
	for n := 0; n < len(b); n++ {
		_, err := DecodePublicationCommand(CmdAddPublication, b[:n])
		var ce *CommandError
		require.True(t, errors.As(err, &ce), "length %d: %v", n, err)
	}
	b = AppendCounterCommand(nil, CounterCommand{Key: []byte{1}, Label: "x"})
	for n := 0; n < len(b); n++ {
		_, err := DecodeCounterCommand(CmdAddCounter, b[:n])
		require.Error(t, err, "length %d", n)
	}
	_, err := DecodePublicationCommand(CmdAddPublication, append(b[:20:20], 0xff, 0xff, 0xff, 0x7f))
	require.ErrorContains(t, err, "malformed ADD_PUBLICATION: channel length 2147483647")
}

func FuzzDecodeCommands(f *testing.F) {
	f.Add(AppendPublicationCommand(nil, PublicationCommand{Channel: "aeron:ipc"}))
	f.Add(AppendCounterCommand(nil, CounterCommand{Key: []byte{1}, Label: "x"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		DecodePublicationCommand(CmdAddPublication, b)
		DecodeSubscriptionCommand(CmdAddSubscription, b)
		DecodeCounterCommand(CmdAddCounter, b)
		DecodeCounterCommand(CmdAddStaticCounter, b)
		DecodeRemoveCommand(CmdRemovePublication, b)
		DecodeDestinationCommand(CmdAddDestination, b)
		DecodeTerminateCommand(CmdTerminateDriver, b)
		DecodeRejectImageCommand(CmdRejectImage, b)
		DecodeImageReady(b)
		DecodeErrorResponse(b)
		DecodePublicationReady(RspOnPublicationReady, b)
	})
}
