package mlx5

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

// Address vectors as rdma-core mlx5_create_ah builds them for the cases the
// RoCE vectors do not cover: an InfiniBand port (LID route, SL in the low
// nibble, GRH bit in grh_gid_fl when global) and RoCE v1 (no UDP port).
func TestBuildAVNotRoCEv2(t *testing.T) {
	ib := buildAV(AVParams{SL: 9, StaticRate: 3, SrcPathBits: 0x85, DLID: 0x1234})
	want := make([]byte, 48)
	want[12] = 8<<4 | 9 // IBV_RATE_10_GBPS (3) is mlx5 rate 8
	want[13] = 0x05
	want[14], want[15] = 0x12, 0x34
	require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(ib[:]))

	var dgid [16]byte
	dgid[0], dgid[15] = 0xfe, 0x01
	g := buildAV(AVParams{SL: 1, DLID: 7, IsGlobal: true, SGIDIndex: 2, FlowLabel: 0x12345, HopLimit: 9, TrafficClass: 4, DGID: dgid})
	require.Equal(t, byte(0x01), g[12])
	require.Equal(t, "0007", hex.EncodeToString(g[14:16]))
	require.Equal(t, []byte{4, 9}, g[26:28])
	require.Equal(t, "40212345", hex.EncodeToString(g[28:32]), "grh=1, sgid_index 2, flow label")
	require.Equal(t, dgid[:], g[32:48])

	v1 := buildAV(AVParams{Ethernet: true, SL: 5, IsGlobal: true, SGIDIndex: 1, HopLimit: 64, DGID: dgid, DMAC: [6]byte{1, 2, 3, 4, 5, 6}})
	require.Equal(t, "0000", hex.EncodeToString(v1[14:16]), "RoCE v1 has no UDP source port")
	require.Equal(t, byte(5<<1), v1[12])
	require.Equal(t, "00100000", hex.EncodeToString(v1[28:32]), "grh bit reserved on RoCE")
	require.Equal(t, []byte{1, 2, 3, 4, 5, 6}, v1[20:26])
}

func TestMLX5Rate(t *testing.T) {
	require.Equal(t, uint8(0), mlx5Rate(0), "port current")
	require.Equal(t, uint8(7), mlx5Rate(2), "2.5 Gbps")
	require.Equal(t, uint8(15), mlx5Rate(16), "100 Gbps to 120")
	require.Equal(t, uint8(0), mlx5Rate(200), "unknown: unlimited")
}

func TestFlowLabelToUDPSport(t *testing.T) {
	require.Equal(t, uint16(0xe341), flowLabelToUDPSport(0x12345)) // ud_send_roce_v2_flow_label
	require.Equal(t, uint16(0xc000), flowLabelToUDPSport(0))
}
