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

// Timestamps reports whether the CQ was created with completion timestamps
// (CQInitAttr.Timestamps, or WCExCompletionTimestamp in WCFlags): then each
// WC.Timestamp is the device's raw completion time.
func (cq *CQ) Timestamps() bool { return cq.stamps }
