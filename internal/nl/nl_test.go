package nl

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
)

// msg builds one netlink message of the given type, seq and body.
func msg(typ uint16, seq uint32, body []byte) []byte {
	b := make([]byte, nlmsgHdrLen+len(body))
	le.PutUint32(b[0:], uint32(len(b)))
	le.PutUint16(b[4:], typ)
	le.PutUint32(b[8:], seq)
	copy(b[nlmsgHdrLen:], body)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func u64attr(e *Encoder, typ uint16, v uint64) {
	var b [8]byte
	le.PutUint64(b[:], v)
	e.put(typ, b[:])
}

func TestParseAttrsRoundTrip(t *testing.T) {
	var e Encoder
	e.U32(abi.RDMA_NLDEV_ATTR_DEV_INDEX, 7)
	e.String(abi.RDMA_NLDEV_ATTR_DEV_NAME, "rxe0") // 5 bytes + 3 pad
	u64attr(&e, abi.RDMA_NLDEV_ATTR_NODE_GUID, 0x7cd814fffe41294c)
	as, err := ParseAttrs(e.Bytes())
	require.NoError(t, err)
	require.Len(t, as, 3)
	s := toSet(as)
	v, ok := s.u32(abi.RDMA_NLDEV_ATTR_DEV_INDEX)
	require.True(t, ok)
	require.EqualValues(t, 7, v)
	require.Equal(t, "rxe0", s.str(abi.RDMA_NLDEV_ATTR_DEV_NAME))
	g, _ := s.u64(abi.RDMA_NLDEV_ATTR_NODE_GUID)
	require.EqualValues(t, uint64(0x7cd814fffe41294c), g)
}

func TestParseAttrsRejectsBadLengths(t *testing.T) {
	for name, b := range map[string][]byte{
		"short header":     {1, 0},
		"length too small": {2, 0, 1, 0},
		"length past end":  {16, 0, 1, 0, 0, 0},
	} {
		_, err := ParseAttrs(b)
		require.ErrorIs(t, err, ErrMalformed, name)
	}
}

func TestParseReplyDumpAndDone(t *testing.T) {
	var d1, d2 Encoder
	d1.U32(abi.RDMA_NLDEV_ATTR_DEV_INDEX, 0)
	d1.String(abi.RDMA_NLDEV_ATTR_DEV_NAME, "rxe0")
	d1.U32(abi.RDMA_NLDEV_ATTR_PORT_INDEX, 1)
	d2.U32(abi.RDMA_NLDEV_ATTR_DEV_INDEX, 1)
	d2.String(abi.RDMA_NLDEV_ATTR_DEV_NAME, "mlx5_0")
	var b []byte
	b = append(b, msg(msgType(abi.RDMA_NLDEV_CMD_GET), 9, d1.Bytes())...)
	b = append(b, msg(msgType(abi.RDMA_NLDEV_CMD_GET), 8, d1.Bytes())...) // stale seq: ignored
	b = append(b, msg(msgType(abi.RDMA_NLDEV_CMD_GET), 9, d2.Bytes())...)
	var out [][]byte
	done, err := parseReply(b, 9, &out)
	require.NoError(t, err)
	require.False(t, done)
	require.Len(t, out, 2)
	done, err = parseReply(msg(abi.NLMSG_DONE, 9, []byte{0, 0, 0, 0}), 9, &out)
	require.NoError(t, err)
	require.True(t, done)
	dev, err := decodeDevice(out[1])
	require.NoError(t, err)
	require.Equal(t, "mlx5_0", dev.Name)
	require.EqualValues(t, 1, dev.Index)
	dev, err = decodeDevice(out[0])
	require.NoError(t, err)
	require.EqualValues(t, 1, dev.NumPorts)
}

func TestParseReplyError(t *testing.T) {
	body := make([]byte, 4+nlmsgHdrLen)
	eno := -int32(sys.EOPNOTSUPP)
	le.PutUint32(body, uint32(eno))
	var out [][]byte
	_, err := parseReply(msg(abi.NLMSG_ERROR, 3, body), 3, &out)
	require.ErrorIs(t, err, sys.EOPNOTSUPP)
	require.ErrorIs(t, err, sys.ErrNotSupported)

	le.PutUint32(body, 0) // ACK
	done, err := parseReply(msg(abi.NLMSG_ERROR, 3, body), 3, &out)
	require.NoError(t, err)
	require.True(t, done)
}

func TestDecodeSummary(t *testing.T) {
	entry := func(name string, v uint64) []byte {
		var e Encoder
		e.String(abi.RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME, name)
		u64attr(&e, abi.RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR, v)
		return e.Bytes()
	}
	var tbl Encoder
	tbl.put(abi.RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY|nlaFNested, entry("pd", 2))
	tbl.put(abi.RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY|nlaFNested, entry("qp", 5))
	var m Encoder
	m.U32(abi.RDMA_NLDEV_ATTR_DEV_INDEX, 0)
	m.put(abi.RDMA_NLDEV_ATTR_RES_SUMMARY|nlaFNested, tbl.Bytes())
	out := map[string]uint64{}
	require.NoError(t, decodeSummary(m.Bytes(), out))
	require.Equal(t, map[string]uint64{"pd": 2, "qp": 5}, out)
}

// On a kernel without ib_core (the build host), Dial says so with ErrNoDevice.
func TestDialWithoutRDMA(t *testing.T) {
	c, err := Dial()
	if err == nil {
		c.Close()
		t.Skip("this kernel has RDMA netlink; the absent case cannot be checked here")
	}
	require.True(t, errors.Is(err, sys.ErrNoDevice), "%v", err)
	require.ErrorIs(t, err, sys.ErrNotSupported)
}

func FuzzParseReply(f *testing.F) {
	var d Encoder
	d.U32(abi.RDMA_NLDEV_ATTR_DEV_INDEX, 0)
	d.String(abi.RDMA_NLDEV_ATTR_DEV_NAME, "rxe0")
	f.Add(msg(msgType(abi.RDMA_NLDEV_CMD_GET), 1, d.Bytes()))
	f.Add(msg(abi.NLMSG_DONE, 1, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		var out [][]byte
		_, _ = parseReply(b, 1, &out)
		for _, m := range out {
			_, _ = decodeDevice(m)
			_, _ = decodePort(m)
			_ = decodeSummary(m, map[string]uint64{})
		}
	})
}
