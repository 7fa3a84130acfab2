package abi

import (
	"encoding/binary"
	"structs"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// ucmEventRespConn and ucmEventRespUD view struct rdma_ucm_event_resp with
// each member of its param union, so the layout tests check the union
// members' offsets inside the response (conn.qp_num at 20, ud.ah_attr at 28).
type ucmEventRespConn struct {
	_      structs.HostLayout
	UID    uint64       `c:"uid"`
	ID     uint32       `c:"id"`
	Event  uint32       `c:"event"`
	Status uint32       `c:"status"`
	Conn   UcmConnParam `c:"param.conn"`
	_      [32]byte
	Res    uint32 `c:"reserved"`
	ECE    UcmECE `c:"ece"`
}

type ucmEventRespUD struct {
	_      structs.HostLayout
	UID    uint64     `c:"uid"`
	ID     uint32     `c:"id"`
	Event  uint32     `c:"event"`
	Status uint32     `c:"status"`
	UD     UcmUDParam `c:"param.ud"`
	Res    uint32     `c:"reserved"`
	ECE    UcmECE     `c:"ece"`
}

func init() {
	for k := range map[string]bool{
		// Post-6.12 commands: not in Debian 12's linux-libc-dev.
		"RDMA_USER_CM_CMD_RESOLVE_IB_SERVICE": true, "RDMA_USER_CM_CMD_WRITE_CM_EVENT": true,
		// librdmacm's enum rdma_cm_event_type (not a uapi header).
		"RDMA_CM_EVENT_ADDR_RESOLVED": true, "RDMA_CM_EVENT_ADDR_ERROR": true, "RDMA_CM_EVENT_ROUTE_RESOLVED": true,
		"RDMA_CM_EVENT_ROUTE_ERROR": true, "RDMA_CM_EVENT_CONNECT_REQUEST": true, "RDMA_CM_EVENT_CONNECT_RESPONSE": true,
		"RDMA_CM_EVENT_CONNECT_ERROR": true, "RDMA_CM_EVENT_UNREACHABLE": true, "RDMA_CM_EVENT_REJECTED": true,
		"RDMA_CM_EVENT_ESTABLISHED": true, "RDMA_CM_EVENT_DISCONNECTED": true, "RDMA_CM_EVENT_DEVICE_REMOVAL": true,
		"RDMA_CM_EVENT_MULTICAST_JOIN": true, "RDMA_CM_EVENT_MULTICAST_ERROR": true, "RDMA_CM_EVENT_ADDR_CHANGE": true,
		"RDMA_CM_EVENT_TIMEWAIT_EXIT": true, "RDMA_CM_EVENT_ADDRINFO_RESOLVED": true, "RDMA_CM_EVENT_ADDRINFO_ERROR": true,
		"RDMA_CM_EVENT_USER": true, "RDMA_CM_EVENT_INTERNAL": true,
		// Kernel-internal values and libc socket numbers.
		"RDMA_UDP_QKEY": true, "IB_CM_EVENT_COMM_EST": true, "IB_CM_EVENT_PATH_MIG": true,
		"IB_CM_REJ_CONSUMER_DEF": true, "IB_CM_REJ_VENDOR_OPTION": true, "IB_PATH_REC_DATA_FLAGS": true,
		"SOCKADDR_IN_SIZE": true, "SOCKADDR_IN6_SIZE": true, "SOCKADDR_IB_SIZE": true, "SOCKADDR_STORAGE_SIZE": true,
		"AF_INET": true, "AF_INET6": true, "AF_IB": true,
	} {
		notInHeaders[k] = true
	}
}

// The brief's write lengths (8-byte header + command) and response sizes
// (cm-brief.md §1), independent of the C headers.
func TestUcmWriteLengths(t *testing.T) {
	hdr := Size[UcmCmdHdr]()
	for name, c := range map[string]struct{ got, want int }{
		"CREATE_ID": {hdr + Size[UcmCreateID](), 32}, "DESTROY_ID": {hdr + Size[UcmDestroyID](), 24},
		"BIND_IP": {hdr + Size[UcmBindIP](), 48}, "BIND": {hdr + Size[UcmBind](), 144},
		"RESOLVE_IP": {hdr + Size[UcmResolveIP](), 72}, "RESOLVE_ADDR": {hdr + Size[UcmResolveAddr](), 280},
		"RESOLVE_ROUTE": {hdr + Size[UcmResolveRoute](), 16}, "QUERY": {hdr + Size[UcmQuery](), 24},
		"CONNECT": {hdr + Size[UcmConnect](), 296}, "LISTEN": {hdr + Size[UcmListen](), 16},
		"ACCEPT": {hdr + Size[UcmAccept](), 304}, "REJECT": {hdr + Size[UcmReject](), 272},
		"DISCONNECT": {hdr + Size[UcmDisconnect](), 12}, "INIT_QP_ATTR": {hdr + Size[UcmInitQPAttr](), 24},
		"GET_EVENT": {hdr + Size[UcmGetEvent](), 16}, "SET_OPTION": {hdr + Size[UcmSetOption](), 32},
		"NOTIFY": {hdr + Size[UcmNotify](), 16}, "JOIN_IP_MCAST": {hdr + Size[UcmJoinIPMcast](), 56},
		"JOIN_MCAST": {hdr + Size[UcmJoinMcast](), 160}, "LEAVE_MCAST": {hdr + Size[UcmDestroyID](), 24},
		"MIGRATE_ID": {hdr + Size[UcmMigrateID](), 24},
		"event resp": {Size[UcmEventResp](), 336}, "query addr resp": {Size[UcmQueryAddrResp](), 280},
		"query route resp": {Size[UcmQueryRouteResp](), 208}, "init qp attr resp": {Size[QPAttrResp](), 144},
	} {
		require.Equal(t, c.want, c.got, name)
	}
	var e UcmEventResp
	require.EqualValues(t, UcmEventRespMinOut, unsafe.Offsetof(e.Reserved))
}

// TestUcmEventUnion checks the union accessors against the brief's byte
// offsets: conn.private_data_len@284 ... valid@291, ud.ah_attr.dgid@28,
// ud.qkey@24, ud.ah_attr.port_num@58, ud.private_data_len@316.
func TestUcmEventUnion(t *testing.T) {
	var e UcmEventResp
	b := Bytes(&e)
	binary.LittleEndian.PutUint32(b[20:], 0x123456)
	binary.LittleEndian.PutUint32(b[24:], RDMA_UDP_QKEY)
	b[28] = 0xfe
	b[58] = 1
	b[57] = 1
	b[284] = 56
	b[286] = 3
	b[287] = 4
	b[291] = 1
	b[316] = 136
	c := e.ConnParam()
	require.EqualValues(t, 0x123456, c.QPNum)
	require.EqualValues(t, 56, c.PrivateDataLen)
	require.EqualValues(t, 3, c.ResponderResources)
	require.EqualValues(t, 4, c.InitiatorDepth)
	require.EqualValues(t, 1, c.Valid)
	u := e.UDParam()
	require.EqualValues(t, RDMA_UDP_QKEY, u.QKey)
	require.EqualValues(t, 0xfe, u.AHAttr.GRH.DGID[0])
	require.EqualValues(t, 1, u.AHAttr.PortNum)
	require.EqualValues(t, 1, u.AHAttr.IsGlobal)
	require.EqualValues(t, 136, u.PrivateDataLen)
}
