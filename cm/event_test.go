package cm

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/abi"
)

// record builds a 336-byte event record with the brief's offsets
// (cm-brief.md §2.1), independent of the abi structs.
func record(uid uint64, handle, typ uint32, status int32) []byte {
	b := make([]byte, 336)
	binary.LittleEndian.PutUint64(b[0:], uid)
	binary.LittleEndian.PutUint32(b[8:], handle)
	binary.LittleEndian.PutUint32(b[12:], typ)
	binary.LittleEndian.PutUint32(b[16:], uint32(status))
	return b
}

func TestDecodeConnEvent(t *testing.T) {
	b := record(7, 3, abi.RDMA_CM_EVENT_CONNECT_REQUEST, 0)
	binary.LittleEndian.PutUint32(b[20:], 0xAB123456) // qp_num (24 bits used)
	copy(b[28:], "hello")
	b[284] = 56 // private_data_len: the kernel's fixed maximum
	b[285] = 1  // srq
	b[286] = 2  // responder_resources
	b[287] = 3  // initiator_depth
	b[288] = 1  // flow_control
	b[289] = 5  // retry
	b[290] = 6  // rnr retry
	binary.LittleEndian.PutUint32(b[328:], 0x1234)
	ev, err := decodeEvent(b, false)
	require.NoError(t, err)
	require.Equal(t, uint64(7), ev.uid)
	require.Equal(t, uint32(3), ev.handle)
	require.Equal(t, EventConnectRequest, ev.typ)
	require.Equal(t, uint32(0x123456), ev.conn.QPN)
	require.Len(t, ev.conn.PrivateData, 56)
	require.Equal(t, "hello", string(ev.conn.PrivateData[:5]))
	require.True(t, ev.conn.SRQ)
	require.True(t, ev.conn.FlowControl)
	require.EqualValues(t, 2, ev.conn.ResponderResources)
	require.EqualValues(t, 3, ev.conn.InitiatorDepth)
	require.EqualValues(t, 5, ev.conn.RetryCount)
	require.EqualValues(t, 6, ev.conn.RNRRetryCount)
	require.EqualValues(t, 0x1234, ev.ece.VendorID)
}

func TestDecodeUDEvent(t *testing.T) {
	b := record(9, 4, abi.RDMA_CM_EVENT_MULTICAST_JOIN, 0)
	binary.LittleEndian.PutUint32(b[20:], 0xFFFFFF)
	binary.LittleEndian.PutUint32(b[24:], abi.RDMA_UDP_QKEY)
	mgid := netip.MustParseAddr("::ffff:239.1.1.1").As16()
	copy(b[28:44], mgid[:])
	binary.LittleEndian.PutUint32(b[44:], 0x12345) // flow label
	b[48] = 1                                      // sgid index
	b[49] = 64                                     // hop limit
	b[50] = 0x20                                   // traffic class
	binary.LittleEndian.PutUint16(b[52:], 0xC001)  // dlid
	b[54] = 3                                      // sl
	b[57] = 1                                      // is_global
	b[58] = 1                                      // port
	b[316] = 136
	ev, err := decodeEvent(b, true)
	require.NoError(t, err)
	require.Equal(t, EventMulticastJoin, ev.typ)
	require.Equal(t, uint32(0xFFFFFF), ev.ud.QPN)
	require.Equal(t, uint32(abi.RDMA_UDP_QKEY), ev.ud.QKey)
	require.Equal(t, mgid, [16]byte(ev.ud.AH.GRH.DGID))
	require.EqualValues(t, 0x12345, ev.ud.AH.GRH.FlowLabel)
	require.EqualValues(t, 1, ev.ud.AH.GRH.SGIDIndex)
	require.EqualValues(t, 64, ev.ud.AH.GRH.HopLimit)
	require.EqualValues(t, 0x20, ev.ud.AH.GRH.TrafficClass)
	require.EqualValues(t, 0xC001, ev.ud.AH.DLID)
	require.EqualValues(t, 3, ev.ud.AH.SL)
	require.True(t, ev.ud.AH.IsGlobal)
	require.EqualValues(t, 1, ev.ud.AH.Port)
	require.Len(t, ev.ud.PrivateData, 136)
}

func TestDecodeShortRecord(t *testing.T) {
	_, err := decodeEvent(make([]byte, 323), false)
	require.ErrorContains(t, err, "323 bytes")
	ev, err := decodeEvent(record(1, 2, abi.RDMA_CM_EVENT_ESTABLISHED, 0)[:324], false)
	require.NoError(t, err)
	require.Equal(t, EventEstablished, ev.typ)
}

func TestEventErrors(t *testing.T) {
	rej := &Event{Type: EventRejected, Status: 8, Conn: ConnParam{PrivateData: []byte("nope")}}
	err := rej.Err()
	require.ErrorIs(t, err, ErrRefused)
	var ce *Error
	require.True(t, errors.As(err, &ce))
	require.Equal(t, RejectInvalidServiceID, ce.Reason)
	require.Equal(t, []byte("nope"), ce.PrivateData)
	require.Contains(t, err.Error(), "REJ 8")

	un := &Event{Type: EventUnreachable, Status: -110}
	require.ErrorIs(t, un.Err(), ErrUnreachable)
	require.ErrorIs(t, un.Err(), ErrTimeout)
	require.ErrorIs(t, un.Err(), syscall.ETIMEDOUT)

	ae := &Event{Type: EventAddrError, Status: -19}
	require.ErrorIs(t, ae.Err(), ErrUnreachable)
	require.ErrorIs(t, ae.Err(), syscall.ENODEV)
	require.NotErrorIs(t, ae.Err(), ErrTimeout)

	require.ErrorIs(t, (&Event{Type: EventRouteError, Status: -110}).Err(), ErrRouteFailed)
	require.ErrorIs(t, (&Event{Type: EventDisconnected}).Err(), ErrDisconnected)
	sidr := &Event{Type: EventUnreachable, Status: 2, UD: true, UDP: UDParam{PrivateData: []byte{1}}}
	require.ErrorIs(t, sidr.Err(), ErrRefused)
	require.NoError(t, (&Event{Type: EventEstablished}).Err())

	require.ErrorIs(t, cmdErr("bind", syscall.EADDRINUSE), ErrPortInUse)
	require.ErrorIs(t, cmdErr("bind", syscall.EADDRNOTAVAIL), ErrPortInUse)
	require.ErrorIs(t, cmdErr("resolve", syscall.ENETUNREACH), ErrUnreachable)
	require.Equal(t, "RDMA_CM_EVENT_REJECTED", EventRejected.String())
	require.Equal(t, "RDMA_CM_EVENT_77", EventType(77).String())
}

func TestConnParamEncode(t *testing.T) {
	var p abi.UcmConnParam
	require.NoError(t, putConnParam(&p, &ConnParam{PrivateData: []byte("abc"), ResponderResources: 1, InitiatorDepth: 2,
		RetryCount: 9, RNRRetryCount: 7, SRQ: true}, 0x42))
	require.EqualValues(t, 0x42, p.QPNum)
	require.EqualValues(t, 3, p.PrivateDataLen)
	require.EqualValues(t, 7, p.RetryCount, "clamped to 7 as the kernel does")
	require.EqualValues(t, 1, p.Valid)
	require.EqualValues(t, 1, p.SRQ)
	require.Error(t, putConnParam(&p, &ConnParam{PrivateData: make([]byte, 257)}, 0))
}

func TestSockaddrRoundTrip(t *testing.T) {
	for _, s := range []string{"10.0.0.1:7174", "[fe80::1%3]:18515", "[2001:db8::5]:1", "0.0.0.0:0"} {
		a, err := ParseAddr(s)
		require.NoError(t, err)
		buf := make([]byte, 128)
		n, err := putSockaddr(buf, a)
		require.NoError(t, err)
		back, err := parseSockaddr(buf, n)
		require.NoError(t, err)
		require.Equal(t, a.IP, back.IP, s)
	}
	buf := make([]byte, 128)
	n, err := putSockaddr(buf, mustAddr(t, "10.0.0.1:7174"))
	require.NoError(t, err)
	require.Equal(t, 16, n)
	require.Equal(t, []byte{2, 0, 0x1c, 0x06, 10, 0, 0, 1}, buf[:8], "family host-endian, port and address big-endian")

	ib := Addr{IB: &IBAddr{PKey: 0xffff, GID: [16]byte{0xfe, 0x80}, SID: serviceID(PortSpaceTCP, 7471), SIDMask: ^uint64(0)}}
	n, err = putSockaddr(buf, ib)
	require.NoError(t, err)
	require.Equal(t, 48, n)
	require.Equal(t, []byte{0, 0, 0, 0, 0x01, 0x06, 0x1d, 0x2f}, buf[24:32], "sid = be64(ps<<16|port)")
	back, err := parseSockaddr(buf, n)
	require.NoError(t, err)
	require.Equal(t, *ib.IB, *back.IB)

	_, err = parseSockaddr(buf, 200)
	require.Error(t, err)
	buf[0] = 99
	_, err = parseSockaddr(buf, 16)
	require.ErrorContains(t, err, "family 99")
}

func mustAddr(t *testing.T, s string) Addr {
	a, err := ParseAddr(s)
	require.NoError(t, err)
	return a
}

func FuzzDecodeEvent(f *testing.F) {
	f.Add(record(1, 0, abi.RDMA_CM_EVENT_CONNECT_REQUEST, 0), false)
	f.Add(record(2, 5, abi.RDMA_CM_EVENT_MULTICAST_JOIN, 0), true)
	r := record(3, 1, abi.RDMA_CM_EVENT_REJECTED, 8)
	r[284] = 255
	f.Add(r, false)
	f.Add(r[:324], true)
	f.Fuzz(func(t *testing.T, b []byte, ud bool) {
		ev, err := decodeEvent(b, ud)
		if err != nil {
			require.Less(t, len(b), 324)
			return
		}
		require.LessOrEqual(t, len(ev.conn.PrivateData), 256)
		require.LessOrEqual(t, len(ev.ud.PrivateData), 256)
		require.LessOrEqual(t, ev.conn.QPN, uint32(0xFFFFFF))
		e := eventFromRaw(&ev, nil, ud)
		_ = e.String()
		if err := e.Err(); err != nil {
			_ = err.Error()
		}
	})
}

func FuzzParseSockaddr(f *testing.F) {
	buf := make([]byte, 128)
	n, _ := putSockaddr(buf, Addr{IP: netip.MustParseAddrPort("10.0.0.1:7174")})
	f.Add(append([]byte(nil), buf...), n)
	n, _ = putSockaddr(buf, Addr{IP: netip.MustParseAddrPort("[fe80::1%2]:1")})
	f.Add(append([]byte(nil), buf...), n)
	f.Fuzz(func(t *testing.T, b []byte, size int) {
		a, err := parseSockaddr(b, size)
		if err != nil || a.IsZero() {
			return
		}
		out := make([]byte, 128)
		m, err := putSockaddr(out, a)
		require.NoError(t, err)
		back, err := parseSockaddr(out, m)
		require.NoError(t, err)
		require.Equal(t, a.String(), back.String())
	})
}
