package abi

import (
	"structs"
	"unsafe"
)

// The RDMA CM write() ABI: rdma/rdma_user_cm.h (with rdma/ib_user_sa.h for
// path records). Unlike uverbs, UcmCmdHdr's In and Out are byte counts, and
// a command's response is written to the u64 address in its Response field.

//revive:disable:var-naming

// rdma/rdma_user_cm.h
const (
	RDMA_USER_CM_ABI_VERSION = 4
	RDMA_MAX_PRIVATE_DATA    = 256
)

// Commands (the anonymous enum of rdma/rdma_user_cm.h).
const (
	RDMA_USER_CM_CMD_CREATE_ID     = 0
	RDMA_USER_CM_CMD_DESTROY_ID    = 1
	RDMA_USER_CM_CMD_BIND_IP       = 2
	RDMA_USER_CM_CMD_RESOLVE_IP    = 3
	RDMA_USER_CM_CMD_RESOLVE_ROUTE = 4
	RDMA_USER_CM_CMD_QUERY_ROUTE   = 5
	RDMA_USER_CM_CMD_CONNECT       = 6
	RDMA_USER_CM_CMD_LISTEN        = 7
	RDMA_USER_CM_CMD_ACCEPT        = 8
	RDMA_USER_CM_CMD_REJECT        = 9
	RDMA_USER_CM_CMD_DISCONNECT    = 10
	RDMA_USER_CM_CMD_INIT_QP_ATTR  = 11
	RDMA_USER_CM_CMD_GET_EVENT     = 12
	RDMA_USER_CM_CMD_GET_OPTION    = 13 // no kernel handler: ENOSYS
	RDMA_USER_CM_CMD_SET_OPTION    = 14
	RDMA_USER_CM_CMD_NOTIFY        = 15
	RDMA_USER_CM_CMD_JOIN_IP_MCAST = 16
	RDMA_USER_CM_CMD_LEAVE_MCAST   = 17
	RDMA_USER_CM_CMD_MIGRATE_ID    = 18
	RDMA_USER_CM_CMD_QUERY         = 19
	RDMA_USER_CM_CMD_BIND          = 20
	RDMA_USER_CM_CMD_RESOLVE_ADDR  = 21
	RDMA_USER_CM_CMD_JOIN_MCAST    = 22
	// Post-6.12 (≈6.18/6.19); EINVAL on older kernels. Not in Debian 12's headers.
	RDMA_USER_CM_CMD_RESOLVE_IB_SERVICE = 23
	RDMA_USER_CM_CMD_WRITE_CM_EVENT     = 24
)

// enum rdma_ucm_port_space
const (
	RDMA_PS_IPOIB = 0x0002
	RDMA_PS_IB    = 0x013F
	RDMA_PS_TCP   = 0x0106
	RDMA_PS_UDP   = 0x0111
)

// QUERY options.
const (
	RDMA_USER_CM_QUERY_ADDR = 0
	RDMA_USER_CM_QUERY_PATH = 1
	RDMA_USER_CM_QUERY_GID  = 2
)

// Multicast join flags.
const (
	RDMA_MC_JOIN_FLAG_FULLMEMBER          = 0
	RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER = 1
)

// SET_OPTION levels and names.
const (
	RDMA_OPTION_ID             = 0
	RDMA_OPTION_IB             = 1
	RDMA_OPTION_ID_TOS         = 0
	RDMA_OPTION_ID_REUSEADDR   = 1
	RDMA_OPTION_ID_AFONLY      = 2
	RDMA_OPTION_ID_ACK_TIMEOUT = 3
	RDMA_OPTION_IB_PATH        = 1
)

// enum rdma_cm_event_type (rdma-core librdmacm/rdma_cma.h; the kernel's
// include/rdma/rdma_cm.h has the same values). Not a uapi header.
const (
	RDMA_CM_EVENT_ADDR_RESOLVED     = 0
	RDMA_CM_EVENT_ADDR_ERROR        = 1
	RDMA_CM_EVENT_ROUTE_RESOLVED    = 2
	RDMA_CM_EVENT_ROUTE_ERROR       = 3
	RDMA_CM_EVENT_CONNECT_REQUEST   = 4
	RDMA_CM_EVENT_CONNECT_RESPONSE  = 5
	RDMA_CM_EVENT_CONNECT_ERROR     = 6
	RDMA_CM_EVENT_UNREACHABLE       = 7
	RDMA_CM_EVENT_REJECTED          = 8
	RDMA_CM_EVENT_ESTABLISHED       = 9
	RDMA_CM_EVENT_DISCONNECTED      = 10
	RDMA_CM_EVENT_DEVICE_REMOVAL    = 11
	RDMA_CM_EVENT_MULTICAST_JOIN    = 12
	RDMA_CM_EVENT_MULTICAST_ERROR   = 13
	RDMA_CM_EVENT_ADDR_CHANGE       = 14
	RDMA_CM_EVENT_TIMEWAIT_EXIT     = 15
	RDMA_CM_EVENT_ADDRINFO_RESOLVED = 16
	RDMA_CM_EVENT_ADDRINFO_ERROR    = 17
	RDMA_CM_EVENT_USER              = 18
	RDMA_CM_EVENT_INTERNAL          = 19
)

// Kernel-internal values the ucma ABI exposes in events (include/rdma/rdma_cm.h,
// include/rdma/ib_cm.h, include/rdma/ib_verbs.h); not in a uapi header.
const (
	RDMA_UDP_QKEY           = 0x01234567 // PS_UDP/PS_IB ids' qkey (SIDR REP, multicast)
	IB_CM_EVENT_COMM_EST    = 4          // NOTIFY event: force ESTABLISHED (enum ib_event_type)
	IB_CM_EVENT_PATH_MIG    = 6          // NOTIFY event: path migrated
	IB_CM_REJ_CONSUMER_DEF  = 28         // REJECT reason the kernel allows (default)
	IB_CM_REJ_VENDOR_OPTION = 35         // VENDOR_OPTION_NOT_SUPPORTED
	IB_PATH_REC_DATA_FLAGS  = 0x2B       // GMP|PRIMARY|BIDIRECTIONAL in ib_path_rec_data.flags
)

// Socket address sizes the ucma commands require exactly (addr_size etc.).
const (
	SOCKADDR_IN_SIZE      = 16
	SOCKADDR_IN6_SIZE     = 28
	SOCKADDR_IB_SIZE      = 48
	SOCKADDR_STORAGE_SIZE = 128
	AF_INET               = 2
	AF_INET6              = 10
	AF_IB                 = 27
)

// UcmCmdHdr mirrors C: struct rdma_ucm_cmd_hdr (rdma/rdma_user_cm.h). In and
// Out are byte counts (unlike uverbs' word counts).
type UcmCmdHdr struct {
	_   structs.HostLayout
	Cmd uint32 `c:"cmd"`
	In  uint16 `c:"in"`
	Out uint16 `c:"out"`
}

// SockaddrIn6 mirrors C: struct sockaddr_in6 (linux/in6.h). Port and
// FlowInfo are big-endian; the legacy ucma commands carry AF_INET in it too.
type SockaddrIn6 struct {
	_        structs.HostLayout
	Family   uint16   `c:"sin6_family"`
	Port     [2]byte  `c:"sin6_port"`     // __be16
	FlowInfo [4]byte  `c:"sin6_flowinfo"` // __be32
	Addr     [16]byte `c:"sin6_addr"`
	ScopeID  uint32   `c:"sin6_scope_id"`
}

// UcmCreateID mirrors C: struct rdma_ucm_create_id (rdma/rdma_user_cm.h).
type UcmCreateID struct {
	_        structs.HostLayout
	UID      uint64  `c:"uid"`
	Response uint64  `c:"response"`
	PS       uint16  `c:"ps"`
	QPType   uint8   `c:"qp_type"`
	Reserved [5]byte `c:"reserved"`
}

// UcmCreateIDResp mirrors C: struct rdma_ucm_create_id_resp (rdma/rdma_user_cm.h).
// JOIN_IP_MCAST and JOIN_MCAST answer with it too (the mc id).
type UcmCreateIDResp struct {
	_  structs.HostLayout
	ID uint32 `c:"id"`
}

// UcmDestroyID mirrors C: struct rdma_ucm_destroy_id (rdma/rdma_user_cm.h).
// LEAVE_MCAST uses it with the mc id.
type UcmDestroyID struct {
	_        structs.HostLayout
	Response uint64 `c:"response"`
	ID       uint32 `c:"id"`
	Reserved uint32 `c:"reserved"`
}

// UcmDestroyIDResp mirrors C: struct rdma_ucm_destroy_id_resp (rdma/rdma_user_cm.h).
type UcmDestroyIDResp struct {
	_              structs.HostLayout
	EventsReported uint32 `c:"events_reported"`
}

// UcmBindIP mirrors C: struct rdma_ucm_bind_ip (rdma/rdma_user_cm.h), the
// legacy BIND_IP.
type UcmBindIP struct {
	_        structs.HostLayout
	Response uint64      `c:"response"`
	Addr     SockaddrIn6 `c:"addr"`
	ID       uint32      `c:"id"`
}

// UcmBind mirrors C: struct rdma_ucm_bind (rdma/rdma_user_cm.h). Addr is a
// struct __kernel_sockaddr_storage.
type UcmBind struct {
	_        structs.HostLayout
	ID       uint32    `c:"id"`
	AddrSize uint16    `c:"addr_size"`
	Reserved uint16    `c:"reserved"`
	Addr     [128]byte `c:"addr"`
}

// UcmResolveIP mirrors C: struct rdma_ucm_resolve_ip (rdma/rdma_user_cm.h),
// the legacy RESOLVE_IP.
type UcmResolveIP struct {
	_         structs.HostLayout
	SrcAddr   SockaddrIn6 `c:"src_addr"`
	DstAddr   SockaddrIn6 `c:"dst_addr"`
	ID        uint32      `c:"id"`
	TimeoutMs uint32      `c:"timeout_ms"`
}

// UcmResolveAddr mirrors C: struct rdma_ucm_resolve_addr (rdma/rdma_user_cm.h).
type UcmResolveAddr struct {
	_         structs.HostLayout
	ID        uint32    `c:"id"`
	TimeoutMs uint32    `c:"timeout_ms"`
	SrcSize   uint16    `c:"src_size"`
	DstSize   uint16    `c:"dst_size"`
	Reserved  uint32    `c:"reserved"`
	SrcAddr   [128]byte `c:"src_addr"`
	DstAddr   [128]byte `c:"dst_addr"`
}

// UcmResolveRoute mirrors C: struct rdma_ucm_resolve_route (rdma/rdma_user_cm.h).
type UcmResolveRoute struct {
	_         structs.HostLayout
	ID        uint32 `c:"id"`
	TimeoutMs uint32 `c:"timeout_ms"`
}

// UcmQuery mirrors C: struct rdma_ucm_query (rdma/rdma_user_cm.h); QUERY and
// the legacy QUERY_ROUTE both use it.
type UcmQuery struct {
	_        structs.HostLayout
	Response uint64 `c:"response"`
	ID       uint32 `c:"id"`
	Option   uint32 `c:"option"`
}

// IBUserPathRec mirrors C: struct ib_user_path_rec (rdma/ib_user_sa.h), the
// host-format path of QUERY_ROUTE.
type IBUserPathRec struct {
	_                      structs.HostLayout
	DGID                   [16]byte `c:"dgid"`
	SGID                   [16]byte `c:"sgid"`
	DLID                   [2]byte  `c:"dlid"` // __be16
	SLID                   [2]byte  `c:"slid"` // __be16
	RawTraffic             uint32   `c:"raw_traffic"`
	FlowLabel              [4]byte  `c:"flow_label"` // __be32
	Reversible             uint32   `c:"reversible"`
	MTU                    uint32   `c:"mtu"`
	PKey                   [2]byte  `c:"pkey"` // __be16
	HopLimit               uint8    `c:"hop_limit"`
	TrafficClass           uint8    `c:"traffic_class"`
	NumbPath               uint8    `c:"numb_path"`
	SL                     uint8    `c:"sl"`
	MTUSelector            uint8    `c:"mtu_selector"`
	RateSelector           uint8    `c:"rate_selector"`
	Rate                   uint8    `c:"rate"`
	PacketLifeTimeSelector uint8    `c:"packet_life_time_selector"`
	PacketLifeTime         uint8    `c:"packet_life_time"`
	Preference             uint8    `c:"preference"`
}

// IBPathRecData mirrors C: struct ib_path_rec_data (rdma/ib_user_sa.h).
// PathRec is a 64-byte big-endian SA PathRecord.
type IBPathRecData struct {
	_        structs.HostLayout
	Flags    uint32   `c:"flags"`
	Reserved uint32   `c:"reserved"`
	PathRec  [64]byte `c:"path_rec"`
}

// UcmQueryRouteResp mirrors C: struct rdma_ucm_query_route_resp (rdma/rdma_user_cm.h).
type UcmQueryRouteResp struct {
	_          structs.HostLayout
	NodeGUID   [8]byte          `c:"node_guid"` // raw __be64
	IBRoute    [2]IBUserPathRec `c:"ib_route"`
	SrcAddr    SockaddrIn6      `c:"src_addr"`
	DstAddr    SockaddrIn6      `c:"dst_addr"`
	NumPaths   uint32           `c:"num_paths"`
	PortNum    uint8            `c:"port_num"`
	Reserved   [3]byte          `c:"reserved"`
	IBDevIndex uint32           `c:"ibdev_index"`
	Reserved1  uint32           `c:"reserved1"`
}

// UcmQueryAddrResp mirrors C: struct rdma_ucm_query_addr_resp (rdma/rdma_user_cm.h).
// QUERY GID answers in the same layout with AF_IB addresses.
type UcmQueryAddrResp struct {
	_          structs.HostLayout
	NodeGUID   [8]byte   `c:"node_guid"` // raw __be64
	PortNum    uint8     `c:"port_num"`
	Reserved   uint8     `c:"reserved"`
	PKey       uint16    `c:"pkey"`
	SrcSize    uint16    `c:"src_size"`
	DstSize    uint16    `c:"dst_size"`
	SrcAddr    [128]byte `c:"src_addr"`
	DstAddr    [128]byte `c:"dst_addr"`
	IBDevIndex uint32    `c:"ibdev_index"`
	Reserved1  uint32    `c:"reserved1"`
}

// UcmQueryPathResp mirrors C: struct rdma_ucm_query_path_resp (rdma/rdma_user_cm.h)
// without its flexible array: NumPaths IBPathRecData records follow it.
type UcmQueryPathResp struct {
	_        structs.HostLayout
	NumPaths uint32 `c:"num_paths"`
	Reserved uint32 `c:"reserved"`
}

// UcmConnParam mirrors C: struct rdma_ucm_conn_param (rdma/rdma_user_cm.h).
type UcmConnParam struct {
	_                  structs.HostLayout
	QPNum              uint32    `c:"qp_num"`
	QKey               uint32    `c:"qkey"`
	PrivateData        [256]byte `c:"private_data"`
	PrivateDataLen     uint8     `c:"private_data_len"`
	SRQ                uint8     `c:"srq"`
	ResponderResources uint8     `c:"responder_resources"`
	InitiatorDepth     uint8     `c:"initiator_depth"`
	FlowControl        uint8     `c:"flow_control"`
	RetryCount         uint8     `c:"retry_count"`
	RNRRetryCount      uint8     `c:"rnr_retry_count"`
	Valid              uint8     `c:"valid"`
}

// UcmUDParam mirrors C: struct rdma_ucm_ud_param (rdma/rdma_user_cm.h): the
// event payload of UD ids (SIDR, multicast).
type UcmUDParam struct {
	_              structs.HostLayout
	QPNum          uint32    `c:"qp_num"`
	QKey           uint32    `c:"qkey"`
	AHAttr         AHAttr    `c:"ah_attr"`
	PrivateData    [256]byte `c:"private_data"`
	PrivateDataLen uint8     `c:"private_data_len"`
	Reserved       [7]byte   `c:"reserved"`
}

// UcmECE mirrors C: struct rdma_ucm_ece (rdma/rdma_user_cm.h).
type UcmECE struct {
	_        structs.HostLayout
	VendorID uint32 `c:"vendor_id"`
	AttrMod  uint32 `c:"attr_mod"`
}

// UcmConnect mirrors C: struct rdma_ucm_connect (rdma/rdma_user_cm.h).
type UcmConnect struct {
	_         structs.HostLayout
	ConnParam UcmConnParam `c:"conn_param"`
	ID        uint32       `c:"id"`
	Reserved  uint32       `c:"reserved"`
	ECE       UcmECE       `c:"ece"`
}

// UcmListen mirrors C: struct rdma_ucm_listen (rdma/rdma_user_cm.h).
type UcmListen struct {
	_       structs.HostLayout
	ID      uint32 `c:"id"`
	Backlog uint32 `c:"backlog"`
}

// UcmAccept mirrors C: struct rdma_ucm_accept (rdma/rdma_user_cm.h).
type UcmAccept struct {
	_         structs.HostLayout
	UID       uint64       `c:"uid"`
	ConnParam UcmConnParam `c:"conn_param"`
	ID        uint32       `c:"id"`
	Reserved  uint32       `c:"reserved"`
	ECE       UcmECE       `c:"ece"`
}

// UcmReject mirrors C: struct rdma_ucm_reject (rdma/rdma_user_cm.h).
type UcmReject struct {
	_              structs.HostLayout
	ID             uint32    `c:"id"`
	PrivateDataLen uint8     `c:"private_data_len"`
	Reason         uint8     `c:"reason"`
	Reserved       [2]byte   `c:"reserved"`
	PrivateData    [256]byte `c:"private_data"`
}

// UcmDisconnect mirrors C: struct rdma_ucm_disconnect (rdma/rdma_user_cm.h).
type UcmDisconnect struct {
	_  structs.HostLayout
	ID uint32 `c:"id"`
}

// UcmInitQPAttr mirrors C: struct rdma_ucm_init_qp_attr (rdma/rdma_user_cm.h).
// The response is a QPAttrResp (struct ib_uverbs_qp_attr, mask at offset 0).
type UcmInitQPAttr struct {
	_        structs.HostLayout
	Response uint64 `c:"response"`
	ID       uint32 `c:"id"`
	QPState  uint32 `c:"qp_state"`
}

// UcmNotify mirrors C: struct rdma_ucm_notify (rdma/rdma_user_cm.h).
type UcmNotify struct {
	_     structs.HostLayout
	ID    uint32 `c:"id"`
	Event uint32 `c:"event"`
}

// UcmJoinIPMcast mirrors C: struct rdma_ucm_join_ip_mcast (rdma/rdma_user_cm.h),
// the legacy JOIN_IP_MCAST (full member only).
type UcmJoinIPMcast struct {
	_        structs.HostLayout
	Response uint64      `c:"response"`
	UID      uint64      `c:"uid"`
	Addr     SockaddrIn6 `c:"addr"`
	ID       uint32      `c:"id"`
}

// UcmJoinMcast mirrors C: struct rdma_ucm_join_mcast (rdma/rdma_user_cm.h).
type UcmJoinMcast struct {
	_         structs.HostLayout
	Response  uint64    `c:"response"`
	UID       uint64    `c:"uid"`
	ID        uint32    `c:"id"`
	AddrSize  uint16    `c:"addr_size"`
	JoinFlags uint16    `c:"join_flags"`
	Addr      [128]byte `c:"addr"`
}

// UcmGetEvent mirrors C: struct rdma_ucm_get_event (rdma/rdma_user_cm.h).
type UcmGetEvent struct {
	_        structs.HostLayout
	Response uint64 `c:"response"`
}

// UcmEventResp mirrors C: struct rdma_ucm_event_resp (rdma/rdma_user_cm.h).
// Param is the union {conn UcmConnParam; ud UcmUDParam}, at offset 20 and only
// 4-byte aligned; which member is filled depends on the id's QP type. Read it
// with EventConnParam / EventUDParam.
type UcmEventResp struct {
	_        structs.HostLayout
	UID      uint64    `c:"uid"`
	ID       uint32    `c:"id"`
	Event    uint32    `c:"event"`
	Status   uint32    `c:"status"` // a negative errno or a positive CM reason
	Param    [304]byte `c:"param"`
	Reserved uint32    `c:"reserved"`
	ECE      UcmECE    `c:"ece"`
}

// UcmEventRespMinOut is the smallest GET_EVENT `out` the kernel accepts:
// the response without reserved and ece (ENOSPC below it).
const UcmEventRespMinOut = 324

// ConnParam returns the conn member of the event's param union.
func (e *UcmEventResp) ConnParam() UcmConnParam {
	return *(*UcmConnParam)(unsafe.Pointer(&e.Param[0]))
}

// UDParam returns the ud member of the event's param union.
func (e *UcmEventResp) UDParam() UcmUDParam {
	return *(*UcmUDParam)(unsafe.Pointer(&e.Param[0]))
}

// UcmSetOption mirrors C: struct rdma_ucm_set_option (rdma/rdma_user_cm.h).
// OptVal is the address of OptLen bytes of arena memory.
type UcmSetOption struct {
	_       structs.HostLayout
	OptVal  uint64 `c:"optval"`
	ID      uint32 `c:"id"`
	Level   uint32 `c:"level"`
	OptName uint32 `c:"optname"`
	OptLen  uint32 `c:"optlen"`
}

// UcmMigrateID mirrors C: struct rdma_ucm_migrate_id (rdma/rdma_user_cm.h).
// Written to the destination fd; FD is the id's current fd.
type UcmMigrateID struct {
	_        structs.HostLayout
	Response uint64 `c:"response"`
	ID       uint32 `c:"id"`
	FD       uint32 `c:"fd"`
}

// UcmMigrateResp mirrors C: struct rdma_ucm_migrate_resp (rdma/rdma_user_cm.h).
type UcmMigrateResp struct {
	_              structs.HostLayout
	EventsReported uint32 `c:"events_reported"`
}

var (
	_ [8]byte   = [unsafe.Sizeof(UcmCmdHdr{})]byte{}
	_ [28]byte  = [unsafe.Sizeof(SockaddrIn6{})]byte{}
	_ [24]byte  = [unsafe.Sizeof(UcmCreateID{})]byte{}
	_ [4]byte   = [unsafe.Sizeof(UcmCreateIDResp{})]byte{}
	_ [16]byte  = [unsafe.Sizeof(UcmDestroyID{})]byte{}
	_ [4]byte   = [unsafe.Sizeof(UcmDestroyIDResp{})]byte{}
	_ [40]byte  = [unsafe.Sizeof(UcmBindIP{})]byte{}
	_ [136]byte = [unsafe.Sizeof(UcmBind{})]byte{}
	_ [64]byte  = [unsafe.Sizeof(UcmResolveIP{})]byte{}
	_ [272]byte = [unsafe.Sizeof(UcmResolveAddr{})]byte{}
	_ [8]byte   = [unsafe.Sizeof(UcmResolveRoute{})]byte{}
	_ [16]byte  = [unsafe.Sizeof(UcmQuery{})]byte{}
	_ [64]byte  = [unsafe.Sizeof(IBUserPathRec{})]byte{}
	_ [72]byte  = [unsafe.Sizeof(IBPathRecData{})]byte{}
	_ [208]byte = [unsafe.Sizeof(UcmQueryRouteResp{})]byte{}
	_ [280]byte = [unsafe.Sizeof(UcmQueryAddrResp{})]byte{}
	_ [8]byte   = [unsafe.Sizeof(UcmQueryPathResp{})]byte{}
	_ [272]byte = [unsafe.Sizeof(UcmConnParam{})]byte{}
	_ [304]byte = [unsafe.Sizeof(UcmUDParam{})]byte{}
	_ [8]byte   = [unsafe.Sizeof(UcmECE{})]byte{}
	_ [288]byte = [unsafe.Sizeof(UcmConnect{})]byte{}
	_ [8]byte   = [unsafe.Sizeof(UcmListen{})]byte{}
	_ [296]byte = [unsafe.Sizeof(UcmAccept{})]byte{}
	_ [264]byte = [unsafe.Sizeof(UcmReject{})]byte{}
	_ [4]byte   = [unsafe.Sizeof(UcmDisconnect{})]byte{}
	_ [16]byte  = [unsafe.Sizeof(UcmInitQPAttr{})]byte{}
	_ [8]byte   = [unsafe.Sizeof(UcmNotify{})]byte{}
	_ [48]byte  = [unsafe.Sizeof(UcmJoinIPMcast{})]byte{}
	_ [152]byte = [unsafe.Sizeof(UcmJoinMcast{})]byte{}
	_ [8]byte   = [unsafe.Sizeof(UcmGetEvent{})]byte{}
	_ [336]byte = [unsafe.Sizeof(UcmEventResp{})]byte{}
	_ [24]byte  = [unsafe.Sizeof(UcmSetOption{})]byte{}
	_ [16]byte  = [unsafe.Sizeof(UcmMigrateID{})]byte{}
	_ [4]byte   = [unsafe.Sizeof(UcmMigrateResp{})]byte{}
)
