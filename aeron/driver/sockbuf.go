package driver

import (
	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/uri"
)

// Socket buffer and receiver window rules of the C conductor. A length of
// 0 means not set (the OS default, which ibgo does not read, so the checks
// that compare with it are skipped).

// checkMTUForSndbuf: a publication's mtu must fit its socket send buffer,
// the channel's so-sndbuf or else the driver's AERON_SOCKET_SO_SNDBUF
// (aeron_publication_params_validate_mtu_for_sndbuf).
func checkMTUForSndbuf(u *uri.ChannelURI, cfg Config, mtu int) error {
	sndbuf, from := int64(cfg.SocketSndbuf), "context"
	if v, ok := u.Size(uri.KeySocketSndbuf); ok {
		sndbuf, from = v, "channel"
	}
	if sndbuf != 0 && sndbuf < int64(mtu) {
		return fail(cnc.ErrorCodeGenericError, "MTU greater than SO_SNDBUF for %s: mtu=%d so-sndbuf=%d", from, mtu, sndbuf)
	}
	return nil
}

// checkWindowForRcvbuf: the receiver window must fit the socket receive
// buffer (aeron_driver_conductor_validate_initial_window_for_rcvbuf; the
// message names SO_SNDBUF as the C driver's does).
func checkWindowForRcvbuf(rcvWnd int64, rcvbuf int, channel string) error {
	if rcvbuf != 0 && int64(rcvbuf) < rcvWnd {
		return fail(cnc.ErrorCodeGenericError, "Initial window greater than SO_SNDBUF for channel: rcv-wnd=%d so-rcvbuf=%d channel=%s", rcvWnd, rcvbuf, channel)
	}
	return nil
}

// checkBuffers: a subscription joining an existing endpoint must not ask
// for other socket buffer lengths than it has, and its window must fit
// (aeron_driver_conductor_get_or_add_receive_channel_endpoint with
// validate_channel_buffer_length).
func (e *receiveEndpoint) checkBuffers(u *uri.ChannelURI, bufs TransportParams, rcvWnd int64, channel string) error {
	if err := checkWindowForRcvbuf(rcvWnd, bufs.SocketRcvbuf, channel); err != nil {
		return err
	}
	return checkSharedBuffers(u, bufs, e.soSndbuf, e.soRcvbuf, e.channel, channel)
}

// checkSharedBuffers: a channel joining an existing endpoint (send or
// receive) must not ask for other socket buffer lengths than it has
// (aeron_driver_conductor_validate_channel_buffer_length).
func checkSharedBuffers(u *uri.ChannelURI, bufs TransportParams, soSndbuf, soRcvbuf int, existingChannel, channel string) error {
	for _, b := range []struct {
		key           string
		new, existing int
	}{{uri.KeySocketSndbuf, bufs.SocketSndbuf, soSndbuf}, {uri.KeySocketRcvbuf, bufs.SocketRcvbuf, soRcvbuf}} {
		if !u.Has(b.key) || b.new == 0 || b.new == b.existing {
			continue
		}
		if b.existing == 0 {
			return fail(cnc.ErrorCodeGenericError, "%s=%d does not match existing value of OS default: existingChannel=%s channel=%s", b.key, b.new, existingChannel, channel)
		}
		return fail(cnc.ErrorCodeGenericError, "%s=%d does not match existing value of %d: existingChannel=%s channel=%s", b.key, b.new, b.existing, existingChannel, channel)
	}
	return nil
}
