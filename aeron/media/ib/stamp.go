package ib

// Media receive timestamps (media-rcv-ts-offset): where the device stamps
// completions and can convert the stamps to wall-clock time, a transport's
// receive CQ is created with completion timestamps and each received frame
// carries the hardware receive time; elsewhere (rxe) the software time at
// polling, as before. A device that writes wall-clock stamps itself (mlx5's
// real-time format, uverbs.CQInitAttr.WallClock) is preferred; else the
// free-running HCA time converted through the kernel's clock-info page
// (uverbs.Context.CompletionClock). The CQ's own CompletionClock converts
// either, so the stamper does not care which.

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ibgo/ibgo/uverbs"
)

// MediaClockStats count how aeron:ib transports stamp received frames when
// their channel asks for media receive timestamps. Every field is safe for
// concurrent use.
type MediaClockStats struct {
	// Hardware counts receive CQs (a UD transport's, an RC subscription's
	// shared one, an RC publication's per connection) created with
	// completion timestamps and a device clock to convert them; Software
	// those on a device without (rxe, or a kernel without the clock-info
	// page), whose frames carry the software receive time. Neither is an
	// error.
	Hardware, Software atomic.Int64
	// Fallbacks counts frames stamped with software time although their
	// CQ has hardware timestamps: the conversion failed (the kernel was
	// rewriting the clock page) or gave a time more than MaxMediaClockSkew
	// away from the host's clock. The first such skew is reported to the
	// driver's error log once per Media.
	Fallbacks atomic.Int64

	skewReported atomic.Bool
}

// MaxMediaClockSkew bounds how far a hardware receive time may be from the
// host's clock (time.Now) at polling for a frame to carry it; beyond it the
// frame carries the software time. The device's clock is the HCA's PTP
// clock: it agrees with the host's only if something synchronises the two
// (phc2sys), and a frame that waited in the CQ longer than this bound is
// also stamped in software.
var MaxMediaClockSkew = time.Second

// softwareNow is the software receive time the driver stamped before
// completion timestamps existed.
func softwareNow() int64 { return time.Now().UnixNano() }

// stamper gives a received frame its media timestamp: 0 when the channel
// asks for none, the hardware receive time of its completion when the CQ
// has timestamps and the device a clock, else the software time. Owned by
// the transport's agent; stamp allocates nothing.
type stamper struct {
	on    bool
	clock uverbs.CompletionClock // nil: software time
	m     *Media
	now   func() int64 // the software clock (tests replace it)
	skew  int64
}

// newStamper is the stamper for frames completing on cq; want
// is the channel's media-rcv-ts-offset. The CQ's completion clock converts
// its stamps, whichever format it has (uverbs.CQ.CompletionClock). It
// counts the choice in Media.MediaClock.
func newStamper(m *Media, want bool, cq *uverbs.CQ) stamper {
	s := stamper{on: want, m: m, now: softwareNow, skew: int64(MaxMediaClockSkew)}
	if !want {
		return s
	}
	if cq != nil && cq.TimestampFormat() != uverbs.TimestampNone {
		if clk, err := cq.CompletionClock(); err == nil {
			s.clock = clk
			m.MediaClock.Hardware.Add(1)
			return s
		}
	}
	m.MediaClock.Software.Add(1)
	return s
}

// stamp is the media timestamp of a frame whose completion carried raw
// (WC.Timestamp).
func (s *stamper) stamp(raw uint64) int64 {
	if !s.on {
		return 0
	}
	now := s.now()
	if s.clock == nil {
		return now
	}
	ns, ok := s.clock.WallNS(raw)
	if ok {
		if d := ns - now; d <= s.skew && d >= -s.skew {
			return ns
		}
		if s.m.MediaClock.skewReported.CompareAndSwap(false, true) {
			s.m.report(fmt.Errorf("ib: the HCA's receive time is %v from the host's clock: frames carry the software receive time (synchronise the NIC's PTP clock with the system clock, e.g. phc2sys)",
				time.Duration(ns-now).Round(time.Millisecond)))
		}
	}
	s.m.MediaClock.Fallbacks.Add(1)
	return now
}

// stampedCQ creates the CQ of attr on vctx, with completion timestamps when
// want and the device offers them (stampedAttrs: wall-clock first, then
// free-running), provided the kernel accepts an RC QP on it: mlx5_ib takes
// a QP's timestamp format from its CQs and refuses one the device lacks
// (qp.c: get_ts_format, EOPNOTSUPP; an mlx5 with only the real-time format
// refuses QPs on a free-running CQ), which a throwaway QP finds before a
// peer's connection would. Any refusal tries the next form, down to the CQ
// without timestamps.
func stampedCQ(vctx *uverbs.Context, pd *uverbs.PD, attr uverbs.CQInitAttr, want bool) (*uverbs.CQ, error) {
	for _, a := range stampedAttrs(vctx, attr, want) {
		cq, err := vctx.CreateCQ(a)
		if err != nil {
			continue
		}
		qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
			Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err == nil {
			qp.Close()
			return cq, nil
		}
		cq.Close()
	}
	return vctx.CreateCQ(attr)
}

// stampedAttrs are the timestamped forms of attr the device offers, best
// first (uverbs.TimestampedCQAttrs); none when !want.
func stampedAttrs(c uverbs.CompletionClocks, attr uverbs.CQInitAttr, want bool) []uverbs.CQInitAttr {
	if !want {
		return nil
	}
	return uverbs.TimestampedCQAttrs(c, attr)
}
