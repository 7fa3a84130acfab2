//go:build linux

package uverbs_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/testutil"
	_ "github.com/ibgo/ibgo/mlx5" // so uverbs.test runs on a ConnectX (docs/hardware.md)
	_ "github.com/ibgo/ibgo/rxe"
	"github.com/ibgo/ibgo/uverbs"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func sysfs(t *testing.T, dev, rel string) string {
	b, err := os.ReadFile(filepath.Join("/sys/class/infiniband", dev, rel))
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

func openCtx(t *testing.T) (testutil.VMInfo, *uverbs.Context) {
	vm := testutil.VM(t)
	c, err := uverbs.Open(vm.Dev)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return vm, c
}

func TestDevicesDiscoversRXE(t *testing.T) {
	vm := testutil.VM(t)
	devs, err := uverbs.Devices()
	require.NoError(t, err)
	var d *uverbs.Device
	for _, x := range devs {
		if x.Name == vm.Dev {
			d = x
		}
	}
	require.NotNil(t, d)
	require.Equal(t, "rxe", d.Driver)
	require.EqualValues(t, abi.RDMA_DRIVER_RXE, d.DriverID, "driver id from RDMA netlink GET_CHARDEV")
	require.True(t, d.HasIndex)
	require.Equal(t, "/dev/infiniband/uverbs0", d.UverbsPath)
	require.Equal(t, 2, d.ABIVersion, "rxe's uverbs ABI version")
	require.Equal(t, sysfs(t, vm.Dev, "node_guid"), d.NodeGUID.String())
	require.Equal(t, uverbs.NodeCA, d.NodeType)
	require.Equal(t, uverbs.TransportIB, d.Transport())
	require.Len(t, d.Ports, 1)
	p := d.Ports[0]
	require.EqualValues(t, 1, p.Port)
	require.Equal(t, "Ethernet", p.LinkLayer)
	require.Equal(t, "ACTIVE", p.State)
	require.Equal(t, vm.Netdev, p.Netdev, "netdev from RDMA netlink PORT_GET")
}

func TestDeviceByNameUnknownListsDevices(t *testing.T) {
	vm := testutil.VM(t)
	_, err := uverbs.DeviceByName("nosuch0")
	require.ErrorIs(t, err, uverbs.ErrNoDevice)
	require.ErrorIs(t, err, uverbs.ErrNotSupported)
	require.Contains(t, err.Error(), vm.Dev)
	var ue *uverbs.Error
	require.True(t, errors.As(err, &ue))
}

func TestOpenContext(t *testing.T) {
	vm := testutil.VM(t)
	c, err := uverbs.Open(vm.Dev)
	require.NoError(t, err)
	require.Equal(t, vm.Dev, c.Device().Name)
	require.Positive(t, c.NumCompVectors())
	require.True(t, c.UsesIoctlWrite(), "kernels >= 5.0 take write commands through INVOKE_WRITE")
	require.NotZero(t, c.CoreSupport()&abi.IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS)
	// The async event fd is a real, distinct anon-inode file.
	target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(c.AsyncFD()))
	require.NoError(t, err)
	require.Contains(t, target, "anon_inode")
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "Close is idempotent")
	_, err = c.QueryDevice()
	require.ErrorIs(t, err, uverbs.ErrClosed)
	require.ErrorIs(t, err, unix.EBADF)
	_, err = c.QueryPort(1)
	require.ErrorIs(t, err, uverbs.ErrClosed)
}

func TestQueryDevice(t *testing.T) {
	vm, c := openCtx(t)
	a, err := c.QueryDevice()
	require.NoError(t, err)
	require.True(t, a.Extended, "EX_QUERY_DEVICE answered")
	require.Equal(t, sysfs(t, vm.Dev, "node_guid"), a.NodeGUID.String())
	require.Equal(t, sysfs(t, vm.Dev, "sys_image_guid"), a.SysImageGUID.String())
	require.EqualValues(t, 1, a.PhysPortCnt)
	require.EqualValues(t, 0xffffff, a.VendorID, "rxe's vendor id")
	require.Equal(t, "0.0.0", a.FWVer)
	require.Greater(t, a.MaxQP, uint32(1000))
	require.Greater(t, a.MaxCQE, uint32(1000))
	require.Greater(t, a.MaxMR, uint32(1000))
	require.EqualValues(t, 32, a.MaxSGE)
	require.Equal(t, uverbs.AtomicHCA, a.AtomicCap)
	require.EqualValues(t, a.DeviceCapFlags, uint32(a.DeviceCapFlagsEx), "low 32 bits of the ex flags repeat the base flags")
}

func TestQueryPort(t *testing.T) {
	vm, c := openCtx(t)
	p, err := c.QueryPort(1)
	require.NoError(t, err)
	require.Equal(t, uverbs.PortActive, p.State)
	require.Equal(t, uverbs.LinkLayerEthernet, p.LinkLayer)
	require.Equal(t, uverbs.MTU4096, p.MaxMTU)
	// rxe's active MTU follows the netdev MTU: the largest IB MTU that fits
	// in it after the RoCE v2 headers.
	want := uverbs.MTU1024
	if vm.MTU >= 4096+100 {
		want = uverbs.MTU4096
	}
	require.Equal(t, want, p.ActiveMTU)
	require.Positive(t, p.GIDTblLen)
	require.EqualValues(t, 1, p.PkeyTblLen)
	for _, bad := range []uint8{0, 2, 255} {
		_, err := c.QueryPort(bad)
		require.Error(t, err, "port %d", bad)
		require.ErrorIs(t, err, unix.EINVAL, "port %d", bad)
		require.Contains(t, err.Error(), "query port")
	}
}

func TestQueryGIDTable(t *testing.T) {
	vm, c := openCtx(t)
	gids, err := c.QueryGIDTable()
	require.NoError(t, err)
	require.NotEmpty(t, gids)
	found := false
	for _, g := range gids {
		require.EqualValues(t, 1, g.Port)
		require.Equal(t, uverbs.GIDTypeRoCEv2, g.Type, "rxe is RoCE v2 only")
		require.Equal(t, vm.Netdev, g.Netdev)
		// Each entry is what sysfs shows at that index.
		require.Equal(t, sysfs(t, vm.Dev, "ports/1/gids/"+strconv.Itoa(int(g.Index))), g.GID.Raw())
		if g.GID.IP().Equal(net.ParseIP(vm.IP)) {
			found = true
		}
	}
	require.True(t, found, "no GID for %s in %v", vm.IP, gids)

	// The sysfs path used on kernels before 5.10 gives the same table.
	fromSysfs, err := c.GIDTableSysfs()
	require.NoError(t, err)
	require.Equal(t, gids, fromSysfs)
}

// The legacy write(2) commands give the same answers as the ioctl path.
func TestWritePathMatchesIoctlPath(t *testing.T) {
	vm, c := openCtx(t)
	devIoctl, err := c.QueryDevice()
	require.NoError(t, err)
	portIoctl, err := c.QueryPort(1)
	require.NoError(t, err)

	d, err := uverbs.DeviceByName(vm.Dev)
	require.NoError(t, err)
	lc, err := uverbs.OpenLegacy(d)
	require.NoError(t, err, "legacy GET_CONTEXT write command")
	defer lc.Close()
	uverbs.ForceWritePath(lc, [2]uint16{abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_QUERY_PORT})
	require.False(t, lc.UsesIoctlWrite())
	require.Equal(t, c.NumCompVectors(), lc.NumCompVectors())
	target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(lc.AsyncFD()))
	require.NoError(t, err)
	require.Contains(t, target, "anon_inode", "the legacy GET_CONTEXT returns the async fd")

	devWrite, err := lc.QueryDevice()
	require.NoError(t, err)
	require.Equal(t, devIoctl, devWrite)
	portWrite, err := lc.QueryPort(1)
	require.NoError(t, err)
	// The write QUERY_PORT response has no port_cap_flags2/active_speed_ex.
	portIoctl.PortCapFlags2, portIoctl.ActiveSpeedEx = 0, 0
	require.Equal(t, portIoctl, portWrite)
}

// The completion-timestamp flag reaches the kernel in both encodings
// (CQ_CREATE's FLAGS attribute, EX_CREATE_CQ's flags) and rxe, which has
// no HCA clock, refuses it with EOPNOTSUPP from its create_cq (a bad
// encoding would be EINVAL from the core instead).
func TestCQTimestampsRefusedByRXE(t *testing.T) {
	b := newBed(t)
	_, err := b.ctx.CreateCQ(uverbs.CQInitAttr{CQE: 8, Timestamps: true})
	requireErrno(t, err, unix.EOPNOTSUPP, "ioctl CQ_CREATE with IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION")

	wc, err := uverbs.Open(b.vm.Dev)
	require.NoError(t, err)
	defer wc.Close()
	uverbs.ForceWritePath(wc, [2]uint16{abi.UVERBS_OBJECT_CQ, abi.UVERBS_METHOD_CQ_CREATE})
	_, err = wc.CreateCQ(uverbs.CQInitAttr{CQE: 8, Timestamps: true})
	requireErrno(t, err, unix.EOPNOTSUPP, "EX_CREATE_CQ with IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION")
	cq, err := wc.CreateCQ(uverbs.CQInitAttr{CQE: 8})
	require.NoError(t, err, "the plain CREATE_CQ still works")
	require.NoError(t, cq.Close())
}
