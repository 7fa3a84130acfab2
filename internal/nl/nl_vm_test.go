//go:build linux

package nl_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/abi"
	. "github.com/ibgo/ibgo/internal/nl"
	"github.com/ibgo/ibgo/internal/sys"
	"github.com/ibgo/ibgo/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func dev(t *testing.T, c *Conn, name string) Device {
	ds, err := c.Devices()
	require.NoError(t, err)
	for _, d := range ds {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("RDMA netlink does not list %s: %+v", name, ds)
	return Device{}
}

func TestNetlinkAgainstKernel(t *testing.T) {
	vm := testutil.VM(t)
	c, err := Dial()
	require.NoError(t, err)
	defer c.Close()
	d := dev(t, c, vm.Dev)
	guid, err := os.ReadFile(filepath.Join("/sys/class/infiniband", vm.Dev, "node_guid"))
	require.NoError(t, err)
	g := strings.ReplaceAll(strings.TrimSpace(string(guid)), ":", "")
	require.Equal(t, g, fmt.Sprintf("%016x", d.NodeGUID))
	require.EqualValues(t, 1, d.NumPorts)
	require.Equal(t, "roce", d.Protocol)

	cd, err := c.Chardev(d.Index, "uverbs")
	require.NoError(t, err)
	require.Equal(t, "uverbs0", cd.Name)
	require.True(t, cd.HasDrvID)
	require.EqualValues(t, abi.RDMA_DRIVER_RXE, cd.DriverID)
	// huge_encode_dev: minor low byte, major, then the minor's high bits.
	major, minor := cd.Dev>>8&0xfff, cd.Dev&0xff|cd.Dev>>12&0xfff00
	require.EqualValues(t, [2]uint64{231, 192}, [2]uint64{major, minor}, "/dev/infiniband/uverbs0 is 231:192")
	require.EqualValues(t, 2, cd.ABI)

	cm, err := c.Chardev(NoDevice, "rdma_cm")
	require.NoError(t, err)
	require.Equal(t, "rdma_cm", cm.Name)
	require.EqualValues(t, 4, cm.ABI, "rdma_cm ABI version")

	ps, err := c.Ports(d.Index)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.Equal(t, vm.Netdev, ps[0].NetdevName)
	require.EqualValues(t, 4, ps[0].State, "ACTIVE")

	sa, err := c.Sys()
	require.NoError(t, err)
	require.True(t, sa.NetnsShared)
	require.True(t, sa.CopyOnFork, "kernels >= 5.13 report copy-on-fork")

	rs, err := c.ResSummary(d.Index)
	require.NoError(t, err)
	for _, k := range []string{"pd", "cq", "qp", "cm_id", "mr", "ctx"} {
		_, ok := rs[k]
		require.True(t, ok, "resource summary lacks %q: %v", k, rs)
	}
}

func TestNetlinkErrors(t *testing.T) {
	vm := testutil.VM(t)
	c, err := Dial()
	require.NoError(t, err)
	defer c.Close()
	ps, err := c.Ports(9999)
	require.NoError(t, err, "a port dump filtered on a missing device is empty, not an error")
	require.Empty(t, ps)
	_, err = c.Chardev(9999, "uverbs")
	require.Error(t, err)
	// Creating a second device with the same name must fail, and must not
	// create anything (two rxe devices in one guest is a known kernel bug).
	err = c.LinkAdd(vm.Dev, "rxe", vm.Netdev)
	require.Error(t, err)
	require.Contains(t, err.Error(), "rdma link add "+vm.Dev)
	err = c.LinkAdd("rxetest", "rxe", "nosuchnetdev0")
	require.Error(t, err)
	require.ErrorIs(t, err, sys.EINVAL, "the kernel answers EINVAL for an unknown netdev")
	require.NoError(t, c.Close())
	_, err = c.Devices()
	require.ErrorIs(t, err, sys.EBADF)
}
