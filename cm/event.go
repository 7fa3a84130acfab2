package cm

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/uverbs"
)

// EventType is an rdma_cm event (enum rdma_cm_event_type).
type EventType uint32

const (
	EventAddrResolved     EventType = abi.RDMA_CM_EVENT_ADDR_RESOLVED
	EventAddrError        EventType = abi.RDMA_CM_EVENT_ADDR_ERROR
	EventRouteResolved    EventType = abi.RDMA_CM_EVENT_ROUTE_RESOLVED
	EventRouteError       EventType = abi.RDMA_CM_EVENT_ROUTE_ERROR
	EventConnectRequest   EventType = abi.RDMA_CM_EVENT_CONNECT_REQUEST
	EventConnectResponse  EventType = abi.RDMA_CM_EVENT_CONNECT_RESPONSE
	EventConnectError     EventType = abi.RDMA_CM_EVENT_CONNECT_ERROR
	EventUnreachable      EventType = abi.RDMA_CM_EVENT_UNREACHABLE
	EventRejected         EventType = abi.RDMA_CM_EVENT_REJECTED
	EventEstablished      EventType = abi.RDMA_CM_EVENT_ESTABLISHED
	EventDisconnected     EventType = abi.RDMA_CM_EVENT_DISCONNECTED
	EventDeviceRemoval    EventType = abi.RDMA_CM_EVENT_DEVICE_REMOVAL
	EventMulticastJoin    EventType = abi.RDMA_CM_EVENT_MULTICAST_JOIN
	EventMulticastError   EventType = abi.RDMA_CM_EVENT_MULTICAST_ERROR
	EventAddrChange       EventType = abi.RDMA_CM_EVENT_ADDR_CHANGE
	EventTimewaitExit     EventType = abi.RDMA_CM_EVENT_TIMEWAIT_EXIT
	EventAddrinfoResolved EventType = abi.RDMA_CM_EVENT_ADDRINFO_RESOLVED
	EventAddrinfoError    EventType = abi.RDMA_CM_EVENT_ADDRINFO_ERROR
	EventUser             EventType = abi.RDMA_CM_EVENT_USER
	EventInternal         EventType = abi.RDMA_CM_EVENT_INTERNAL
)

var eventNames = [...]string{
	"ADDR_RESOLVED", "ADDR_ERROR", "ROUTE_RESOLVED", "ROUTE_ERROR", "CONNECT_REQUEST",
	"CONNECT_RESPONSE", "CONNECT_ERROR", "UNREACHABLE", "REJECTED", "ESTABLISHED",
	"DISCONNECTED", "DEVICE_REMOVAL", "MULTICAST_JOIN", "MULTICAST_ERROR", "ADDR_CHANGE",
	"TIMEWAIT_EXIT", "ADDRINFO_RESOLVED", "ADDRINFO_ERROR", "USER", "INTERNAL",
}

// String is librdmacm's rdma_event_str spelling: "RDMA_CM_EVENT_REJECTED".
func (t EventType) String() string {
	if int(t) < len(eventNames) {
		return "RDMA_CM_EVENT_" + eventNames[t]
	}
	return "RDMA_CM_EVENT_" + strconv.FormatUint(uint64(t), 10)
}

// IsError reports whether the event means the operation failed
// (ADDR_ERROR, ROUTE_ERROR, CONNECT_ERROR, UNREACHABLE, REJECTED,
// MULTICAST_ERROR, ADDRINFO_ERROR).
func (t EventType) IsError() bool {
	switch t {
	case EventAddrError, EventRouteError, EventConnectError, EventUnreachable, EventRejected,
		EventMulticastError, EventAddrinfoError:
		return true
	}
	return false
}

// ConnParam are the connection parameters of CONNECT, ACCEPT and the RC
// events (struct rdma_conn_param); a plain value (the calls that take one
// read it and keep nothing). In events, ResponderResources and
// InitiatorDepth are already in the local view (the kernel swaps the peer's).
type ConnParam struct {
	PrivateData        []byte // ≤56 B on CONNECT (RC), ≤196 on ACCEPT, ≤148 on REJECT; SIDR: 180/136
	ResponderResources uint8  // RDMA reads/atomics we accept from the peer at once
	InitiatorDepth     uint8  // RDMA reads/atomics we issue at once
	FlowControl        bool
	RetryCount         uint8 // 0..7
	RNRRetryCount      uint8 // 0..7 (7: infinite)
	SRQ                bool
	QPN                uint32 // the QP's number (set from the id's QP when it has one)
	QKey               uint32 // UD only (the kernel uses 0x01234567 for IP port spaces)
}

// UDParam is the payload of UD events: ESTABLISHED after a SIDR REP (the
// remote QP), MULTICAST_JOIN (QPN 0xFFFFFF, the group's Q_Key and address)
// and, where the kernel fills it, ADDR/ROUTE_RESOLVED and CONNECT_RESPONSE
// of UDP-port-space ids (struct rdma_ud_param).
type UDParam struct {
	QPN         uint32
	QKey        uint32
	AH          uverbs.AHAttr
	PrivateData []byte
}

// ECE is the Enhanced Connection Establishment word pair (0 on rxe).
type ECE struct {
	VendorID uint32
	AttrMod  uint32
}

// Event is one rdma_cm event, copied out of the kernel's record, so it stays
// valid forever (no rdma_ack_cm_event). It is a plain value: safe to read
// from several goroutines; its ids are safe for concurrent use.
type Event struct {
	Type EventType
	// Status is the kernel's raw status: a negative errno (ADDR_ERROR,
	// ROUTE_ERROR, UNREACHABLE −110, MULTICAST_ERROR) or a positive CM
	// reason (REJECTED: the REJ reason; UNREACHABLE of a SIDR: the SIDR
	// status). Err turns it into a typed error.
	Status int32
	// ID is the id the event belongs to: for CONNECT_REQUEST the listener,
	// for multicast events the id that joined.
	ID *ID
	// Child is the new id of a CONNECT_REQUEST, on the listener's channel;
	// accept or reject it, and Close it if it is not accepted.
	Child *ID
	// Handle is the kernel's id field of the record: the new id's handle for
	// CONNECT_REQUEST, the multicast handle for MULTICAST_JOIN/ERROR, else
	// the id's own handle.
	Handle uint32
	// UID is the record's uid (the Go registry key the id was created with).
	UID uint64
	// UD says which member of the kernel's param union was filled: UD ids
	// (port spaces UDP, IPOIB, or IB with a UD QP) get UDParam, others
	// ConnParam.
	UD   bool
	Conn ConnParam
	UDP  UDParam
	ECE  ECE
}

// PrivateData is the event's private data (Conn's or UDP's). Its length is
// the kernel's fixed maximum for the message (56/196/148/180/136), not what
// the peer sent: put a length inside your own format.
func (e *Event) PrivateData() []byte {
	if e.UD {
		return e.UDP.PrivateData
	}
	return e.Conn.PrivateData
}

func (e *Event) String() string {
	s := e.Type.String()
	if e.Status != 0 {
		s += fmt.Sprintf(", error %d", e.Status)
	}
	return s
}

// Err is nil for a success event, else a typed *Error (see errors.go):
// ADDR_ERROR → ErrUnreachable, ROUTE_ERROR → ErrRouteFailed, REJECTED →
// ErrRefused with the reason and peer's private data, UNREACHABLE →
// ErrUnreachable (and ErrTimeout for −110), DISCONNECTED → ErrDisconnected,
// DEVICE_REMOVAL, CONNECT_ERROR, MULTICAST_ERROR → the errno.
func (e *Event) Err() error { return eventErr("", e) }

// rawEvent is the decoded kernel record before the dispatcher attaches ids.
type rawEvent struct {
	uid    uint64
	handle uint32
	typ    EventType
	status int32
	conn   ConnParam
	ud     UDParam
	ece    ECE
}

// decodeEvent decodes one struct rdma_ucm_event_resp of at least
// UcmEventRespMinOut bytes; ud selects the param union member (the id's QP
// type decides it, not the event). Private data is copied (its length is
// clamped to the 256-byte field).
func decodeEvent(b []byte, ud bool) (rawEvent, error) {
	if len(b) < abi.UcmEventRespMinOut {
		return rawEvent{}, fmt.Errorf("cm: event record of %d bytes, want at least %d", len(b), abi.UcmEventRespMinOut)
	}
	var r abi.UcmEventResp
	copy(abi.Bytes(&r), b)
	ev := rawEvent{uid: r.UID, handle: r.ID, typ: EventType(r.Event), status: int32(r.Status),
		ece: ECE{VendorID: r.ECE.VendorID, AttrMod: r.ECE.AttrMod}}
	if len(b) < abi.Size[abi.UcmEventResp]() {
		ev.ece = ECE{} // a short record (out = 324) has no ece
	}
	if ud {
		p := r.UDParam()
		ev.ud = UDParam{QPN: p.QPNum, QKey: p.QKey, AH: ahFromABI(p.AHAttr),
			PrivateData: clonePD(p.PrivateData[:], p.PrivateDataLen)}
		return ev, nil
	}
	p := r.ConnParam()
	ev.conn = connFromABI(&p)
	return ev, nil
}

func clonePD(b []byte, n uint8) []byte {
	if n == 0 {
		return nil
	}
	return append([]byte(nil), b[:min(int(n), len(b))]...)
}

func connFromABI(p *abi.UcmConnParam) ConnParam {
	return ConnParam{
		QPN: p.QPNum & 0xFFFFFF, QKey: p.QKey,
		PrivateData:        clonePD(p.PrivateData[:], p.PrivateDataLen),
		SRQ:                p.SRQ != 0,
		ResponderResources: p.ResponderResources, InitiatorDepth: p.InitiatorDepth,
		FlowControl: p.FlowControl != 0, RetryCount: p.RetryCount, RNRRetryCount: p.RNRRetryCount,
	}
}

// putConnParam fills the kernel's conn param; private data longer than the
// 256-byte field is an error (the kernel's per-message limits are smaller
// and it answers EINVAL itself).
func putConnParam(p *abi.UcmConnParam, c *ConnParam, qpn uint32) error {
	if len(c.PrivateData) > abi.RDMA_MAX_PRIVATE_DATA {
		return fmt.Errorf("cm: %d bytes of private data, the most is %d", len(c.PrivateData), abi.RDMA_MAX_PRIVATE_DATA)
	}
	p.QPNum, p.QKey = qpn, c.QKey
	copy(p.PrivateData[:], c.PrivateData)
	p.PrivateDataLen = uint8(len(c.PrivateData))
	p.SRQ = b2u(c.SRQ)
	p.ResponderResources, p.InitiatorDepth = c.ResponderResources, c.InitiatorDepth
	p.FlowControl = b2u(c.FlowControl)
	p.RetryCount, p.RNRRetryCount = min(c.RetryCount, 7), min(c.RNRRetryCount, 7)
	p.Valid = 1
	return nil
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func ahFromABI(a abi.AHAttr) uverbs.AHAttr {
	return uverbs.AHAttr{
		GRH: uverbs.GlobalRoute{DGID: uverbs.GID(a.GRH.DGID), FlowLabel: a.GRH.FlowLabel, SGIDIndex: a.GRH.SGIDIndex,
			HopLimit: a.GRH.HopLimit, TrafficClass: a.GRH.TrafficClass},
		DLID: a.DLID, SL: a.SL, SrcPathBits: a.SrcPathBits, StaticRate: a.StaticRate,
		IsGlobal: a.IsGlobal != 0, Port: a.PortNum,
	}
}

// eventFromRaw attaches the ids.
func eventFromRaw(r *rawEvent, id *ID, ud bool) *Event {
	return &Event{Type: r.typ, Status: r.status, ID: id, Handle: r.handle, UID: r.uid, UD: ud,
		Conn: r.conn, UDP: r.ud, ECE: r.ece}
}

// le is shorthand for the host byte order of the ABI (little-endian on the
// supported architectures).
var le = binary.LittleEndian
