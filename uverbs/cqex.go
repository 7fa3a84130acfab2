package uverbs

import (
	"fmt"

	"github.com/ibgo/ibgo/internal/sys"
)

// Extended CQ polling: rdma-core's struct ibv_cq_ex with ibv_start_poll,
// ibv_next_poll, ibv_end_poll and the ibv_wc_read_* getters
// (libibverbs/verbs.h), for programs ported from C. Any CQ can be polled this
// way; CQInitAttr.WCFlags says which fields the program will read, as
// ibv_create_cq_ex's wc_flags do.

// WCExFlags select the completion fields an extended CQ provides (enum
// ibv_create_cq_wc_flags).
type WCExFlags uint64

const (
	WCExByteLen                      WCExFlags = 1 << 0
	WCExImm                          WCExFlags = 1 << 1
	WCExQPNum                        WCExFlags = 1 << 2
	WCExSrcQP                        WCExFlags = 1 << 3
	WCExSLID                         WCExFlags = 1 << 4
	WCExSL                           WCExFlags = 1 << 5
	WCExDLIDPathBits                 WCExFlags = 1 << 6
	WCExCompletionTimestamp          WCExFlags = 1 << 7
	WCExCVLAN                        WCExFlags = 1 << 8
	WCExFlowTag                      WCExFlags = 1 << 9
	WCExTMInfo                       WCExFlags = 1 << 10
	WCExCompletionTimestampWallclock WCExFlags = 1 << 11

	// WCExStandard is IBV_WC_STANDARD_FLAGS: what every device provides.
	WCExStandard = WCExByteLen | WCExImm | WCExQPNum | WCExSrcQP | WCExSLID | WCExSL | WCExDLIDPathBits
)

// wcExSupported is what ibgo's WC carries: the standard fields, the raw
// completion timestamp and its wall-clock time (which also need the
// device: rxe refuses them).
const wcExSupported = WCExStandard | WCExCompletionTimestamp | WCExCompletionTimestampWallclock

// ErrCQEmpty is returned by StartPoll and NextPoll when no completion is
// waiting (rdma-core returns ENOENT; errors.Is(err, sys.ENOENT) holds). It is
// one value, so an empty poll allocates nothing.
var ErrCQEmpty = sys.NewErrno(sys.ENOENT)

// checkWCFlags validates CQInitAttr.WCFlags (rdma-core's providers refuse
// flags they cannot fill with EOPNOTSUPP, e.g. rxe.c: rxe_create_cq_ex).
func checkWCFlags(attr *CQInitAttr) error {
	if extra := attr.WCFlags &^ wcExSupported; extra != 0 {
		return fmt.Errorf("%w: completion fields %#x (ibgo provides the standard ones and the completion timestamp)",
			ErrNotSupported, uint64(extra))
	}
	return nil
}

// wallclockWCFlag chooses the timestamp format for
// WCExCompletionTimestampWallclock as libmlx5 does (verbs.c: create_cq sets
// MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS only without
// IBV_WC_EX_WITH_COMPLETION_TIMESTAMP; cq.c: mlx5_cq_fill_pfns otherwise
// converts free-running stamps through the clock-info page, or fails with
// EOPNOTSUPP without one): the device's wall-clock format when it has one
// and the raw stamp is not also asked for, else free-running stamps and
// the context's CompletionClock. It returns the converter of
// ReadCompletionWallclockNS (nil without the flag).
func (c *Context) wallclockWCFlag(attr *CQInitAttr) (CompletionClock, error) {
	if attr.WCFlags&WCExCompletionTimestampWallclock == 0 {
		return nil, nil
	}
	if !attr.Timestamps {
		clk, err := c.wallClock()
		if err == nil {
			attr.WallClock = true
			return clk, nil
		}
		if attr.WallClock {
			return nil, err // asked for explicitly: no fallback
		}
	}
	clk, err := c.CompletionClock()
	if err != nil {
		return nil, fmt.Errorf("completion wall-clock time (WCExCompletionTimestampWallclock): %w", err)
	}
	attr.Timestamps = true
	return clk, nil
}

// cqPoll is the state of an extended poll: the completion the getters read.
type cqPoll struct {
	wc     [1]WC
	active bool
}

// StartPoll begins an extended poll and makes the oldest completion current
// (ibv_start_poll). It returns ErrCQEmpty when there is none, in which case
// EndPoll must not be called. It takes no system call and allocates nothing
// on providers with a user-space datapath.
//
// Concurrency: StartPoll..EndPoll, the getters and Poll must be called from
// one goroutine at a time per CQ, as in rdma-core.
func (cq *CQ) StartPoll() error {
	if cq.closed.Load() {
		return ErrClosed
	}
	if cq.poll.active {
		return &Error{Op: "start poll", Err: fmt.Errorf("%w: a poll is already active (call EndPoll)", sys.NewErrno(sys.EINVAL))}
	}
	n, err := cq.drv.Poll(cq.poll.wc[:])
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrCQEmpty
	}
	cq.poll.active = true
	return nil
}

// NextPoll makes the next completion current (ibv_next_poll), or returns
// ErrCQEmpty; the poll stays active either way until EndPoll.
func (cq *CQ) NextPoll() error {
	if !cq.poll.active {
		return &Error{Op: "next poll", Err: fmt.Errorf("%w: no poll is active (call StartPoll)", sys.NewErrno(sys.EINVAL))}
	}
	if cq.closed.Load() {
		return ErrClosed
	}
	n, err := cq.drv.Poll(cq.poll.wc[:])
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrCQEmpty
	}
	return nil
}

// EndPoll ends the poll StartPoll began (ibv_end_poll).
func (cq *CQ) EndPoll() { cq.poll.active = false }

// The getters read the current completion (between a successful StartPoll
// or NextPoll and the next one). They mirror struct ibv_cq_ex's wr_id and
// status fields and the ibv_wc_read_* functions; fields the CQ was not
// created for (CQInitAttr.WCFlags) read as whatever the provider reported,
// where rdma-core would leave them undefined.

// WRID is the current completion's work request id (ibv_cq_ex.wr_id).
func (cq *CQ) WRID() uint64 { return cq.poll.wc[0].WRID }

// Status is the current completion's status (ibv_cq_ex.status).
func (cq *CQ) Status() WCStatus { return cq.poll.wc[0].Status }

// ReadOpcode mirrors ibv_wc_read_opcode.
func (cq *CQ) ReadOpcode() WCOpcode { return cq.poll.wc[0].Opcode }

// ReadVendorErr mirrors ibv_wc_read_vendor_err.
func (cq *CQ) ReadVendorErr() uint32 { return cq.poll.wc[0].VendorErr }

// ReadByteLen mirrors ibv_wc_read_byte_len.
func (cq *CQ) ReadByteLen() uint32 { return cq.poll.wc[0].ByteLen }

// ReadImmData mirrors ibv_wc_read_imm_data, in host order (the C call
// returns it big-endian).
func (cq *CQ) ReadImmData() uint32 { return cq.poll.wc[0].Imm }

// ReadInvalidatedRKey mirrors ibv_wc_read_invalidated_rkey (WCWithInv).
func (cq *CQ) ReadInvalidatedRKey() uint32 { return cq.poll.wc[0].Imm }

// ReadQPNum mirrors ibv_wc_read_qp_num.
func (cq *CQ) ReadQPNum() uint32 { return cq.poll.wc[0].QPN }

// ReadSrcQP mirrors ibv_wc_read_src_qp.
func (cq *CQ) ReadSrcQP() uint32 { return cq.poll.wc[0].SrcQP }

// ReadWCFlags mirrors ibv_wc_read_wc_flags.
func (cq *CQ) ReadWCFlags() WCFlags { return cq.poll.wc[0].Flags }

// ReadSLID mirrors ibv_wc_read_slid.
func (cq *CQ) ReadSLID() uint16 { return cq.poll.wc[0].SLID }

// ReadSL mirrors ibv_wc_read_sl.
func (cq *CQ) ReadSL() uint8 { return cq.poll.wc[0].SL }

// ReadDLIDPathBits mirrors ibv_wc_read_dlid_path_bits.
func (cq *CQ) ReadDLIDPathBits() uint8 { return cq.poll.wc[0].DLIDPathBits }

// ReadCompletionTS mirrors ibv_wc_read_completion_ts: the raw device clock
// (0 unless the CQ was created with WCExCompletionTimestamp).
func (cq *CQ) ReadCompletionTS() uint64 { return cq.poll.wc[0].Timestamp }

// ReadCompletionWallclockNS mirrors ibv_wc_read_completion_wallclock_ns:
// the current completion's time in nanoseconds since the Unix epoch, for a
// CQ created with WCExCompletionTimestampWallclock (0 otherwise, or when
// the stamp cannot be converted now: see CompletionClock.WallNS). Unlike
// libmlx5 on a real-time CQ, which returns the CQE's seconds:nanoseconds
// field as it is, the provider's clock decodes it.
func (cq *CQ) ReadCompletionWallclockNS() uint64 {
	if cq.wcClock == nil {
		return 0
	}
	ns, ok := cq.wcClock.WallNS(cq.poll.wc[0].Timestamp)
	if !ok {
		return 0
	}
	return uint64(ns)
}

// ReadPkeyIndex is the current completion's P_Key index (struct ibv_wc's
// pkey_index, which ibv_cq_ex has no getter for).
func (cq *CQ) ReadPkeyIndex() uint16 { return cq.poll.wc[0].PkeyIndex }
