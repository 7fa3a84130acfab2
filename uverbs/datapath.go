package uverbs

import "strconv"

// SGE is a scatter/gather element: length bytes at Addr in the region of LKey.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// WROpcode is a send work request's operation (enum ibv_wr_opcode).
type WROpcode uint32

const (
	WRRDMAWrite         WROpcode = 0
	WRRDMAWriteWithImm  WROpcode = 1
	WRSend              WROpcode = 2
	WRSendWithImm       WROpcode = 3
	WRRDMARead          WROpcode = 4
	WRAtomicCmpAndSwp   WROpcode = 5
	WRAtomicFetchAndAdd WROpcode = 6
	WRLocalInv          WROpcode = 7
	WRBindMW            WROpcode = 8
	WRSendWithInv       WROpcode = 9
	// WRFlush and WRAtomicWrite need a device with them (DeviceFlushGlobal,
	// DeviceAtomicWrite; rxe from Linux 6.2) and a QP created with
	// SendOpFlush / SendOpAtomicWrite; rdma-core reaches them only through
	// ibv_wr_flush / ibv_wr_atomic_write (QPEx here).
	WRFlush       WROpcode = 14
	WRAtomicWrite WROpcode = 15
)

func (o WROpcode) String() string {
	switch o {
	case WRRDMAWrite:
		return "RDMA_WRITE"
	case WRRDMAWriteWithImm:
		return "RDMA_WRITE_WITH_IMM"
	case WRSend:
		return "SEND"
	case WRSendWithImm:
		return "SEND_WITH_IMM"
	case WRRDMARead:
		return "RDMA_READ"
	case WRAtomicCmpAndSwp:
		return "ATOMIC_CMP_AND_SWP"
	case WRAtomicFetchAndAdd:
		return "ATOMIC_FETCH_AND_ADD"
	case WRLocalInv:
		return "LOCAL_INV"
	case WRBindMW:
		return "BIND_MW"
	case WRSendWithInv:
		return "SEND_WITH_INV"
	case WRFlush:
		return "FLUSH"
	case WRAtomicWrite:
		return "ATOMIC_WRITE"
	}
	return "WROpcode(" + strconv.Itoa(int(o)) + ")"
}

// SendFlags modify a send work request (enum ibv_send_flags).
type SendFlags uint32

const (
	SendFence     SendFlags = 1 << 0
	SendSignaled  SendFlags = 1 << 1
	SendSolicited SendFlags = 1 << 2
	SendInline    SendFlags = 1 << 3
)

// SendWR is a send work request. SGL is the caller's; nothing is retained
// after PostSend returns (inline data is copied, other SGEs are read by the
// device later, from the registered memory they name).
type SendWR struct {
	WRID   uint64 // returned in the completion; any caller value
	SGL    []SGE
	Opcode WROpcode
	Flags  SendFlags
	Imm    uint32 // immediate data (host order) for *_WITH_IMM; the rkey to invalidate for SEND_WITH_INV and LOCAL_INV

	// RDMA and atomic operations.
	RemoteAddr uint64
	RKey       uint32
	CompareAdd uint64 // compare value (CMP_AND_SWP) or addend (FETCH_AND_ADD)
	Swap       uint64

	// UD.
	AH         *AH
	RemoteQPN  uint32
	RemoteQKey uint32

	// BIND_MW: the window, its new key and range. Posting it makes
	// Bind.RKey the window's RKey.
	Bind MWBindWR

	// InlineData, when not nil, is the payload itself, copied into the work
	// queue at post time instead of gathered from SGL (which is then
	// ignored); it need not be registered memory. With SendInline it is the
	// inline payload (ibv_wr_set_inline_data); for WRAtomicWrite it holds
	// the 8 bytes to write (ibv_wr_atomic_write). Providers without it
	// refuse the work request.
	InlineData []byte

	// FLUSH (WRFlush): the length of the range at RemoteAddr, the placement
	// type and the selectivity level (ibv_wr_flush).
	FlushLength uint32
	FlushType   FlushType
	FlushLevel  FlushLevel
}

// RecvWR is a receive work request.
type RecvWR struct {
	WRID uint64
	SGL  []SGE
}

// WCStatus is a completion's status (enum ibv_wc_status).
type WCStatus uint32

const (
	WCSuccess          WCStatus = 0
	WCLocLenErr        WCStatus = 1
	WCLocQPOpErr       WCStatus = 2
	WCLocEECOpErr      WCStatus = 3
	WCLocProtErr       WCStatus = 4
	WCWRFlushErr       WCStatus = 5
	WCMWBindErr        WCStatus = 6
	WCBadRespErr       WCStatus = 7
	WCLocAccessErr     WCStatus = 8
	WCRemInvReqErr     WCStatus = 9
	WCRemAccessErr     WCStatus = 10
	WCRemOpErr         WCStatus = 11
	WCRetryExcErr      WCStatus = 12
	WCRNRRetryExcErr   WCStatus = 13
	WCLocRDDViolErr    WCStatus = 14
	WCRemInvRDReqErr   WCStatus = 15
	WCRemAbortErr      WCStatus = 16
	WCInvEECNErr       WCStatus = 17
	WCInvEECStateErr   WCStatus = 18
	WCFatalErr         WCStatus = 19
	WCRespTimeoutErr   WCStatus = 20
	WCGeneralErr       WCStatus = 21
	WCTMErr            WCStatus = 22
	WCTMRndvIncomplete WCStatus = 23
)

var wcStatusNames = [...]string{
	"success", "local length error", "local QP operation error", "local EE context operation error",
	"local protection error", "Work Request Flushed Error", "memory management operation error",
	"bad response error", "local access error", "remote invalid request error", "remote access error",
	"remote operation error", "transport retry counter exceeded", "RNR retry counter exceeded",
	"local RDD violation error", "remote invalid RD request", "aborted error", "invalid EE context number",
	"invalid EE context state", "fatal error", "response timeout error", "general error",
	"TM error", "TM software rendezvous",
}

// String is ibv_wc_status_str's text.
func (s WCStatus) String() string {
	if int(s) < len(wcStatusNames) {
		return wcStatusNames[s]
	}
	return "unknown"
}

// WCOpcode is a completion's operation (enum ibv_wc_opcode).
type WCOpcode uint32

const (
	WCSend            WCOpcode = 0
	WCRDMAWrite       WCOpcode = 1
	WCRDMARead        WCOpcode = 2
	WCCompSwap        WCOpcode = 3
	WCFetchAdd        WCOpcode = 4
	WCBindMW          WCOpcode = 5
	WCLocalInv        WCOpcode = 6
	WCFlush           WCOpcode = 8
	WCAtomicWrite     WCOpcode = 9
	WCRecv            WCOpcode = 128
	WCRecvRDMAWithImm WCOpcode = 129
)

func (o WCOpcode) String() string {
	switch o {
	case WCSend:
		return "SEND"
	case WCRDMAWrite:
		return "RDMA_WRITE"
	case WCRDMARead:
		return "RDMA_READ"
	case WCCompSwap:
		return "COMP_SWAP"
	case WCFetchAdd:
		return "FETCH_ADD"
	case WCBindMW:
		return "BIND_MW"
	case WCLocalInv:
		return "LOCAL_INV"
	case WCFlush:
		return "FLUSH"
	case WCAtomicWrite:
		return "ATOMIC_WRITE"
	case WCRecv:
		return "RECV"
	case WCRecvRDMAWithImm:
		return "RECV_RDMA_WITH_IMM"
	}
	return "WCOpcode(" + strconv.Itoa(int(o)) + ")"
}

// WCFlags qualify a completion (enum ibv_wc_flags).
type WCFlags uint32

const (
	WCWithGRH WCFlags = 1 << 0 // the first 40 bytes of the buffer hold the GRH (UD)
	WCWithImm WCFlags = 1 << 1
	WCWithInv WCFlags = 1 << 2
)

// WC is a work completion.
type WC struct {
	WRID         uint64
	Status       WCStatus
	Opcode       WCOpcode
	VendorErr    uint32
	ByteLen      uint32
	Imm          uint32 // immediate data in host order (WithImm), or the invalidated rkey
	QPN          uint32 // the local QP
	SrcQP        uint32 // the remote QP (UD)
	Flags        WCFlags
	PkeyIndex    uint16
	SLID         uint16
	SL           uint8
	DLIDPathBits uint8
	// Timestamp is the raw HCA completion time in the CQ's
	// TimestampFormat (free-running device clock ticks for
	// CQInitAttr.Timestamps, the device's wall-clock encoding for
	// CQInitAttr.WallClock; CQ.CompletionClock converts either to
	// wall-clock time), 0 on a CQ created without timestamps.
	Timestamp uint64
}
