package driver

import (
	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/uri"
)

// Channel keys. Every key of the C driver 1.48 is in one of three places:
// driverKeys (medium-independent, honoured by the driver on the media
// they name), a medium's own keys (ChannelKeyDeclarer: ib-qp and
// media-rcv-ts-offset on aeron:ib), or notSupportedKeys (refused with
// INVALID_CHANNEL naming the key). A key is accepted on a medium only
// where something reads it: none is accepted and ignored.
//
// A key counts for a medium, not for a role: a channel string is often
// shared by a publication and its subscription, so rcv-wnd is accepted on
// an aeron:udp publication (the subscription side reads it) while
// endpoint= is refused on aeron:ipc, where nothing reads it.

// keyMedia says on which media a driver key has meaning.
type keyMedia uint8

const (
	onIPC keyMedia = 1 << iota
	onNetwork
	onBoth = onIPC | onNetwork
)

var driverKeys = map[string]keyMedia{
	// the log and the publication (aeron_driver_uri_publication_params)
	uri.KeyTermLength: onBoth, uri.KeyMTU: onBoth, uri.KeyInitialTermID: onBoth, uri.KeyTermID: onBoth,
	uri.KeyTermOffset: onBoth, uri.KeySessionID: onBoth, uri.KeyLinger: onBoth, uri.KeySparse: onBoth,
	uri.KeyEOS: onBoth, uri.KeySpiesSimulateConnection: onBoth, uri.KeyPublicationWindow: onBoth,
	uri.KeyAlias: onBoth,
	// channel tag (endpoints, spies; no meaning on IPC in C either) and
	// entity tag (session-id=tag:, the log's metadata)
	uri.KeyTags: onBoth,
	// subscriptions (aeron_driver_uri_subscription_params)
	uri.KeyTether: onBoth, uri.KeyRejoin: onBoth, uri.KeyUntetheredWindowLimitTimeout: onBoth,
	uri.KeyUntetheredLingerTimeout: onBoth, uri.KeyUntetheredRestingTimeout: onBoth,
	// network endpoints, flow and loss control
	uri.KeyEndpoint: onNetwork, uri.KeyControl: onNetwork, uri.KeyControlMode: onNetwork,
	uri.KeyInterface: onNetwork, uri.KeyTTL: onNetwork, uri.KeySocketSndbuf: onNetwork,
	uri.KeySocketRcvbuf: onNetwork, uri.KeyReceiverWindow: onNetwork, uri.KeyFlowControl: onNetwork,
	uri.KeyGroupTag: onNetwork, uri.KeyGroup: onNetwork, uri.KeyReliable: onNetwork,
	uri.KeyMaxResend: onNetwork, uri.KeyNakDelay: onNetwork, uri.KeyCongestionControl: onNetwork,
	// response channels (control-mode=response)
	uri.KeyResponseCorrelationID: onNetwork,
	// timestamps the driver writes (timestamps.go); media-rcv-ts-offset
	// is a medium's (ChannelKeyDeclarer)
	uri.KeyChannelRcvTimestampOffset: onNetwork, uri.KeyChannelSndTimestampOffset: onNetwork,
}

// notSupportedKeys are the C driver's keys ibgo does not implement yet,
// with what the refusal says.
var notSupportedKeys = map[string]string{
	uri.KeyATS:                     "ats (Aeron Transport Security)",
	uri.KeyStreamID:                "stream-id (a stream id is given by the command, not the channel)",
	uri.KeyMediaRcvTimestampOffset: "media-rcv-ts-offset (this medium gives no receive timestamps)",
	uri.KeyIBQueuePair:             "ib-qp (an aeron:ib key)",
	uri.KeyIBMode:                  "ib-mode (an aeron:ib key)",
}

// ChannelKeyDeclarer is implemented by a Media that understands channel
// keys of its own, beyond the driver's medium-independent ones; the
// driver accepts them on that medium's channels only. A plain method: the
// result must not change.
type ChannelKeyDeclarer interface {
	ChannelKeys() []string
}

// checkKeys refuses a key that nothing reads on u's medium, naming it.
// med is the network medium (nil for aeron:ipc).
func checkKeys(u *uri.ChannelURI, channel string, med Media) error {
	var own []string
	if d, ok := med.(ChannelKeyDeclarer); ok && med != nil {
		own = d.ChannelKeys()
	}
	where := onNetwork
	if u.Media == uri.MediaIPC && !u.Spy {
		where = onIPC
	}
	for _, p := range u.Params {
		if driverKeys[p.Key]&where != 0 || contains(own, p.Key) {
			continue
		}
		if driverKeys[p.Key] != 0 {
			return fail(cnc.ErrorCodeInvalidChannel, "%s: parameter '%s' has no meaning on aeron:%s", channel, p.Key, u.Media)
		}
		if why, ok := notSupportedKeys[p.Key]; ok {
			return fail(cnc.ErrorCodeInvalidChannel, "%s: parameter '%s' is not supported on aeron:%s by this driver yet: %s", channel, p.Key, u.Media, why)
		}
		return fail(cnc.ErrorCodeInvalidChannel, "%s: parameter '%s' is not supported on aeron:%s by this driver", channel, p.Key, u.Media)
	}
	if v, ok := u.Bool(uri.KeyRejoin); ok && !v {
		// C keeps an ended session's image from coming back to such a
		// subscription; ibgo's images always rejoin
		return fail(cnc.ErrorCodeInvalidChannel, "%s: rejoin=false is not supported by this driver yet (images always rejoin)", channel)
	}
	return nil
}

func contains(keys []string, k string) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}

// sparse is a subscription's sparse= or AERON_TERM_BUFFER_SPARSE_FILE.
func (c *conductor) sparse(u *uri.ChannelURI) bool {
	if v, ok := u.Bool(uri.KeySparse); ok {
		return v
	}
	return c.cfg.TermBufferSparseFile
}
