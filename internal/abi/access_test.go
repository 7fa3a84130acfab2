package abi

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAsReadBytes(t *testing.T) {
	b := make([]byte, 24)
	h := As[IoctlHdr](b)
	h.Length, h.DriverID = 0x1234, 0xa0b0c0d0
	require.Equal(t, []byte{0x34, 0x12}, b[0:2])
	require.Equal(t, []byte{0xd0, 0xc0, 0xb0, 0xa0}, b[16:20])
	v, ok := Read[IoctlHdr](b)
	require.True(t, ok)
	require.Equal(t, *h, v)
	_, ok = Read[IoctlHdr](b[:23])
	require.False(t, ok)
	require.Equal(t, b, Bytes(h))
	require.Equal(t, 24, Size[IoctlHdr]())
	require.PanicsWithValue(t, "abi.As[abi.IoctlHdr]: 23-byte buffer for a 24-byte struct", func() { As[IoctlHdr](b[:23]) })
}

func TestExQueryDeviceRespEnd(t *testing.T) {
	e := ExQueryDeviceRespEnd
	require.Equal(t, uint32(Size[QueryDeviceResp]()+8), e.ODPCapsStart)
	require.Less(t, e.ODPCapsStart, e.ODPCaps)
	require.Less(t, e.MaxDMSize, e.XRCODPCaps)
	require.LessOrEqual(t, e.XRCODPCaps, uint32(Size[ExQueryDeviceResp]()))
}
