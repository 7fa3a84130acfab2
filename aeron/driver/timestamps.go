package driver

import (
	"strconv"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/uri"
)

// Timestamps in data frames, as the C driver 1.48 writes them
// (aeron_timestamps.c): each of media-rcv-ts-offset (the medium's receive
// time: SO_TIMESTAMPNS on aeron:udp, the completion time on aeron:ib),
// channel-rcv-ts-offset (the driver's realtime clock as it takes the
// datagram) and channel-snd-ts-offset (the realtime clock as the sender
// sends it) names where the 8-byte timestamp of the first frame of a
// datagram goes: "reserved" (the data header's reserved value) or an
// offset into the payload. Only a data frame that begins a message and
// has room gets one.

const (
	tsNone     = -1 // not given (AERON_NULL_VALUE)
	tsReserved = -8 // "reserved" (AERON_UDP_CHANNEL_RESERVED_VALUE_OFFSET)
)

// tsOffsets are a channel's three timestamp offsets, as C holds them.
type tsOffsets struct{ mediaRcv, channelRcv, channelSnd int32 }

// tsEnabled is aeron_udp_channel_is_*_timestamps_enabled.
func tsEnabled(off int32) bool { return off == tsReserved || off >= 0 }

// tsInfo is aeron_driver_uri_get_offset_info.
func tsInfo(off int32) string {
	switch off {
	case tsNone:
		return "(not specified)"
	case tsReserved:
		return "(reserved)"
	}
	return ""
}

// parseTimestampOffsets reads the three offsets
// (aeron_driver_uri_get_timestamp_offset; C names media-rcv-ts-offset in
// the message whichever key it was) and refuses two that overlap
// (aeron_udp_channel_verify_timestamp_offsets_do_not_overlap).
func parseTimestampOffsets(u *uri.ChannelURI) (tsOffsets, error) {
	ts := tsOffsets{tsNone, tsNone, tsNone}
	for _, k := range []struct {
		key string
		dst *int32
	}{{uri.KeyMediaRcvTimestampOffset, &ts.mediaRcv}, {uri.KeyChannelRcvTimestampOffset, &ts.channelRcv},
		{uri.KeyChannelSndTimestampOffset, &ts.channelSnd}} {
		v, ok := u.Get(k.key)
		if !ok {
			continue
		}
		if v == uri.TimestampReserved {
			*k.dst = tsReserved
			continue
		}
		n, err := strconv.ParseInt(v, 0, 32)
		if err != nil {
			return ts, fail(cnc.ErrorCodeInvalidChannel, "Invalid %s: %s", uri.KeyMediaRcvTimestampOffset, v)
		}
		*k.dst = int32(n)
	}
	overlap := func(a, b int32) bool {
		d := a - b
		return a != tsNone && b != tsNone && d < 8 && d > -8
	}
	switch {
	case overlap(ts.mediaRcv, ts.channelRcv):
		return ts, fail(cnc.ErrorCodeInvalidChannel, "%s and %s overlap", uri.KeyMediaRcvTimestampOffset, uri.KeyChannelRcvTimestampOffset)
	case overlap(ts.mediaRcv, ts.channelSnd):
		return ts, fail(cnc.ErrorCodeInvalidChannel, "%s and %s overlap", uri.KeyMediaRcvTimestampOffset, uri.KeyChannelSndTimestampOffset)
	case overlap(ts.channelRcv, ts.channelSnd):
		return ts, fail(cnc.ErrorCodeInvalidChannel, "%s and %s overlap", uri.KeyChannelRcvTimestampOffset, uri.KeyChannelSndTimestampOffset)
	}
	return ts, nil
}

// tsConflict is C's refusal of a channel whose offset differs from its
// shared endpoint's (has_clashing_timestamp_offsets; C says "subscription"
// for publications too).
func tsConflict(key string, off int32, existing, channel string) error {
	return fail(cnc.ErrorCodeInvalidChannel, "option conflicts with existing subscription: %s=%d %s existingChannel=%s channel=%s",
		key, off, tsInfo(off), existing, channel)
}
