package uverbs

import (
	"fmt"
)

// Completion timestamps in wall-clock time: a CQ created with
// CQInitAttr.Timestamps carries the device's raw completion time in each
// WC.Timestamp (free-running HCA clock ticks); a CompletionClock turns it
// into nanoseconds since the Unix epoch. This is what rdma-core offers as
// IBV_WC_EX_WITH_COMPLETION_TIMESTAMP plus
// ibv_wc_read_completion_wallclock_ns, split in two so that a plain Poll
// into a []WC (no allocation, no per-completion call into the provider)
// stays the datapath.
//
// A device that keeps a real-time clock can instead write wall-clock
// stamps itself (CQInitAttr.WallClock: mlx5's real-time format,
// rdma-core's IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK on such a
// device); CQ.CompletionClock returns the right converter for either
// format, so callers need not know which one the CQ has.

// CompletionClock converts a device's raw completion timestamps to
// wall-clock time. Providers whose device stamps completions implement it
// (mlx5: the kernel's clock-info page, mlx5dv_ts_to_ns); others (rxe) have
// none and Context.CompletionClock says so.
//
// The wall clock is the device's own clock as the kernel keeps it (mlx5:
// the HCA's PTP hardware clock, set from the system's real time when the
// driver loads and disciplined by whatever synchronises the PHC, e.g.
// ptp4l/phc2sys). It is close to the host's CLOCK_REALTIME only when the
// two are synchronised; callers that mix it with host time should check.
//
// Concurrency: WallNS is safe for concurrent use and allocates nothing. A
// clock is usable while its Context is open; after Context.Close, WallNS
// reports false.
type CompletionClock interface {
	// WallNS converts raw, a WC.Timestamp from a CQ of the same context
	// created with CQInitAttr.Timestamps, to nanoseconds since the Unix
	// epoch. ok is false when no conversion is possible now (the kernel
	// is updating the clock parameters, the context is closed, raw is 0):
	// the caller uses another time for that completion.
	WallNS(raw uint64) (ns int64, ok bool)
}

// CompletionClocker is implemented by a ProviderContext whose device can
// convert completion timestamps to wall-clock time (mlx5).
// Context.CompletionClock calls it after checking the device's
// capabilities; an error wrapping ErrNotSupported means "no clock here".
type CompletionClocker interface {
	CompletionClock() (CompletionClock, error)
}

// CompletionClock returns the clock that converts this device's completion
// timestamps (WC.Timestamp of a CQ created with CQInitAttr.Timestamps) to
// wall-clock time. It returns an error wrapping ErrNotSupported when the
// device reports no completion timestamps (EX_QUERY_DEVICE's
// completion_timestamp_mask is 0, as on rxe) or its provider cannot convert
// them (no clock-info page); a CQ with timestamps should then not be
// created (rxe refuses it with EOPNOTSUPP). It issues QUERY_DEVICE: call it
// on the control path, once, and keep the clock.
func (c *Context) CompletionClock() (CompletionClock, error) {
	const op = "completion clock"
	a, err := c.QueryDevice()
	if err != nil {
		return nil, opErr(c.dev.Name, op, err)
	}
	if a.CompletionTimestampMask == 0 {
		return nil, &Error{Op: op, Device: c.dev.Name,
			Err: fmt.Errorf("%w: the device reports no completion timestamps (completion_timestamp_mask 0, hca_core_clock %d kHz)", ErrNotSupported, a.HCACoreClock)}
	}
	cc, ok := c.prov.(CompletionClocker)
	if !ok {
		return nil, &Error{Op: op, Device: c.dev.Name,
			Err: fmt.Errorf("%w: the %s provider cannot convert completion timestamps to wall-clock time", ErrNotSupported, c.dev.Driver)}
	}
	clk, err := cc.CompletionClock()
	if err != nil {
		return nil, opErr(c.dev.Name, op, err)
	}
	return clk, nil
}

// Timestamps reports whether the CQ was created with free-running
// completion timestamps (CQInitAttr.Timestamps, or WCExCompletionTimestamp
// in WCFlags): then each WC.Timestamp is the device's raw completion time,
// which Context.CompletionClock converts. It is false for a CQ created with
// CQInitAttr.WallClock (see TimestampFormat).
func (cq *CQ) Timestamps() bool { return cq.stamps }

// TimestampFormat is the form of WC.Timestamp on a CQ.
type TimestampFormat uint8

const (
	// TimestampNone: no completion timestamps; WC.Timestamp is 0.
	TimestampNone TimestampFormat = iota
	// TimestampFreeRunning: the device's free-running clock
	// (CQInitAttr.Timestamps; IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION).
	TimestampFreeRunning
	// TimestampWallClock: the device's wall-clock time in its own encoding
	// (CQInitAttr.WallClock; mlx5's real-time format, seconds in the upper
	// 32 bits and nanoseconds in the lower).
	TimestampWallClock
)

func (f TimestampFormat) String() string {
	switch f {
	case TimestampNone:
		return "none"
	case TimestampFreeRunning:
		return "free-running"
	case TimestampWallClock:
		return "wall-clock"
	}
	return fmt.Sprintf("TimestampFormat(%d)", uint8(f))
}

// TimestampFormat reports the form of the CQ's WC.Timestamp.
func (cq *CQ) TimestampFormat() TimestampFormat {
	switch {
	case cq.wall != nil:
		return TimestampWallClock
	case cq.stamps:
		return TimestampFreeRunning
	}
	return TimestampNone
}

// CompletionClock returns the clock that converts this CQ's WC.Timestamp
// to wall-clock time, whichever format the CQ was created with: the
// provider's wall-clock decoder for a CQInitAttr.WallClock CQ (no command),
// the context's CompletionClock for a CQInitAttr.Timestamps one (a
// QUERY_DEVICE: call it on the control path and keep the clock). A CQ
// without timestamps, or a device that cannot convert them, gives an error
// wrapping ErrNotSupported.
func (cq *CQ) CompletionClock() (CompletionClock, error) {
	switch {
	case cq.wall != nil:
		return cq.wall, nil
	case cq.stamps:
		return cq.ctx.CompletionClock()
	}
	var dev string
	if cq.ctx != nil {
		dev = cq.ctx.dev.Name
	}
	return nil, &Error{Op: "completion clock", Device: dev,
		Err: fmt.Errorf("%w: the CQ was created without completion timestamps (CQInitAttr.Timestamps or WallClock)", ErrNotSupported)}
}

// WallClockCompletionClocker is implemented by a ProviderContext whose
// device can write completion timestamps in wall-clock form (mlx5 with the
// real-time clock format). The provider's NewCQ then sees
// CQInitAttr.WallClock only when WallClockCompletionClock succeeded.
type WallClockCompletionClocker interface {
	// WallClockCompletionClock returns the decoder of such timestamps, or
	// an error wrapping ErrNotSupported when this device cannot write
	// them. It issues no command.
	WallClockCompletionClock() (CompletionClock, error)
}

// WallClockCompletionClock returns the clock that converts the completion
// timestamps of CQs created with CQInitAttr.WallClock, which the device
// writes in wall-clock form, to nanoseconds since the Unix epoch. It
// returns an error wrapping ErrNotSupported when the provider (rxe) or the
// device (an mlx5 without the real-time clock format) cannot write them;
// CreateCQ refuses such a CQ the same way, before any command. It issues
// no command.
//
// The clock is the device's PTP hardware clock (see CompletionClock): close
// to the host's CLOCK_REALTIME only when the two are synchronised.
func (c *Context) WallClockCompletionClock() (CompletionClock, error) {
	clk, err := c.wallClock()
	if err != nil {
		return nil, &Error{Op: "wall-clock completion clock", Device: c.dev.Name, Err: err}
	}
	return clk, nil
}

// CompletionClocks is what TimestampedCQAttrs asks of a device; Context
// has both methods.
type CompletionClocks interface {
	WallClockCompletionClock() (CompletionClock, error)
	CompletionClock() (CompletionClock, error)
}

// TimestampedCQAttrs are the forms of attr with completion timestamps that
// the device behind c offers, best first: wall-clock stamps the device
// writes itself (CQInitAttr.WallClock: no conversion, no clock page to
// read), then free-running ones with a clock to convert them
// (CQInitAttr.Timestamps). The other fields are attr's. It is empty where
// the device stamps nothing it can convert (rxe). A caller tries the forms
// in turn and attr without timestamps last: the kernel may still refuse
// one, or a QP on a CQ of that form (mlx5_ib takes a QP's timestamp format
// from its CQs: qp.c get_ts_format, EOPNOTSUPP). It issues no command
// beyond the clocks' (a QUERY_DEVICE at most).
func TimestampedCQAttrs(c CompletionClocks, attr CQInitAttr) []CQInitAttr {
	var out []CQInitAttr
	if _, err := c.WallClockCompletionClock(); err == nil {
		a := attr
		a.WallClock, a.Timestamps = true, false
		out = append(out, a)
	}
	if _, err := c.CompletionClock(); err == nil {
		a := attr
		a.WallClock, a.Timestamps = false, true
		out = append(out, a)
	}
	return out
}

func (c *Context) wallClock() (CompletionClock, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	wc, ok := c.prov.(WallClockCompletionClocker)
	if !ok {
		return nil, fmt.Errorf("%w: the %s provider has no wall-clock completion timestamps", ErrNotSupported, c.dev.Driver)
	}
	return wc.WallClockCompletionClock()
}
