package uverbs

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGIDStringMatchesInetNtop(t *testing.T) {
	for in, want := range map[string]string{
		"fe80:0000:0000:0000:909a:e9ff:fe06:ef9b": "fe80::909a:e9ff:fe06:ef9b",
		"0000:0000:0000:0000:0000:ffff:0a00:0001": "::ffff:10.0.0.1",
		"0000:0000:0000:0000:0000:0000:0a00:0001": "::10.0.0.1",
		"0000:0000:0000:0000:0000:0000:0000:0001": "::1",
		"0000:0000:0000:0000:0000:0000:0000:0000": "::",
		"2001:0db8:0000:0000:0001:0000:0000:0001": "2001:db8::1:0:0:1",
		"2001:0db8:0000:0001:0001:0001:0001:0001": "2001:db8:0:1:1:1:1:1",
		"fe80:0000:0000:0000:0000:0000:0000:0000": "fe80::",
	} {
		g, err := ParseGID(in)
		require.NoError(t, err)
		require.Equal(t, want, g.String(), in)
		require.Equal(t, in, g.Raw())
		back, err := ParseGID(want)
		require.NoError(t, err)
		require.Equal(t, g, back)
	}
	_, err := ParseGID("not a gid")
	require.Error(t, err)
}

func TestGUID(t *testing.T) {
	g, err := ParseGUID("909a:e9ff:fe06:ef9b")
	require.NoError(t, err)
	require.Equal(t, "909a:e9ff:fe06:ef9b", g.String())
	require.Equal(t, "909ae9fffe06ef9b", g.Hex())
	require.Equal(t, uint64(0x909ae9fffe06ef9b), g.Uint64())
	require.Equal(t, g, GUIDFromUint64(g.Uint64()))
	for _, bad := range []string{"", "909a:e9ff", "zzzz:e9ff:fe06:ef9b"} {
		_, err := ParseGUID(bad)
		require.Error(t, err, bad)
	}
}

func TestMTU(t *testing.T) {
	require.Equal(t, 4096, MTU4096.Bytes())
	require.Equal(t, 256, MTU256.Bytes())
	require.Equal(t, 0, MTU(0).Bytes())
	require.Equal(t, MTU1024, MTUFromBytes(1024))
	require.Equal(t, MTU(0), MTUFromBytes(1500))
	require.Equal(t, "invalid MTU", MTU(9).String())
}

func TestPickNetdev(t *testing.T) {
	devs := []*Device{
		{Name: "mlx5_0", Ports: []PortInfo{{Port: 1, Netdev: "net1"}}},
		{Name: "mlx5_1", Ports: []PortInfo{{Port: 1, Netdev: "net2"}, {Port: 2, Netdev: "net3"}}},
		{Name: "mlx5_2", Ports: []PortInfo{{Port: 1}}},
		{Name: "rxe0", Ports: []PortInfo{{Port: 1, Netdev: "bond0"}}},
		{Name: "rxe1", Ports: []PortInfo{{Port: 1, Netdev: "bond0"}}},
	}
	d, p, err := PickNetdev(devs, "net3")
	require.NoError(t, err)
	require.Equal(t, "mlx5_1", d.Name)
	require.Equal(t, uint32(2), p.Port)
	_, _, err = PickNetdev(devs, "eth9")
	require.ErrorIs(t, err, ErrNoDevice)
	require.ErrorContains(t, err, "interfaces with an RDMA device: bond0, net1, net2, net3")
	_, _, err = PickNetdev(devs, "bond0")
	require.NotErrorIs(t, err, ErrNoDevice, "ambiguous is not absent")
	require.ErrorContains(t, err, "rxe0 port 1, rxe1 port 1")
	_, _, err = PickNetdev(devs[2:3], "net1")
	require.ErrorContains(t, err, "no RDMA port has a network interface")
}
