package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/uverbs"
)

func runIbgo(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"ibgo"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// withSysfs points device discovery at a fake sysfs tree for the test.
func withSysfs(t *testing.T, root string) {
	old := uverbs.SysfsRoot
	uverbs.SysfsRoot = root
	t.Cleanup(func() { uverbs.SysfsRoot = old })
}

func writeFiles(t *testing.T, root string, files map[string]string) {
	for p, v := range files {
		full := filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(v+"\n"), 0o644))
	}
}

func TestNoDevicesSaysWhatToCheck(t *testing.T) {
	withSysfs(t, t.TempDir())
	for _, cmd := range [][]string{{"devices"}, {"devinfo"}, {"devinfo", "-v"}, {"devinfo", "-l"}} {
		code, out, stderr := runIbgo(t, cmd...)
		require.Equal(t, 1, code, "%v", cmd)
		require.Empty(t, out)
		require.Contains(t, stderr, "no RDMA devices found")
		for _, hint := range []string{"mlx5_ib", "rdma_rxe", "ib_uverbs", "rdma link"} {
			require.Contains(t, stderr, hint, "%v", cmd)
		}
	}
}

// fakeRXE lays out the sysfs files of one soft-RoCE device as the 6.1 kernel
// shows them (seen in the VM), without a uverbs char device behind it.
func fakeRXE(t *testing.T) string {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"class/infiniband/rxe0/node_type":                 "1: CA",
		"class/infiniband/rxe0/node_guid":                 "909a:e9ff:fe06:ef9b",
		"class/infiniband/rxe0/sys_image_guid":            "909a:e9ff:fe06:ef9b",
		"class/infiniband/rxe0/fw_ver":                    "",
		"class/infiniband/rxe0/node_desc":                 "rxe",
		"class/infiniband/rxe0/parent":                    "dummy0",
		"class/infiniband/rxe0/ports/1/state":             "4: ACTIVE",
		"class/infiniband/rxe0/ports/1/phys_state":        "5: LinkUp",
		"class/infiniband/rxe0/ports/1/link_layer":        "Ethernet",
		"class/infiniband/rxe0/ports/1/rate":              "2.5 Gb/sec (1X SDR)",
		"class/infiniband/rxe0/ports/1/gid_attrs/ndevs/0": "dummy0",
		"class/infiniband_verbs/uverbs0/ibdev":            "rxe0",
		"class/infiniband_verbs/uverbs0/abi_version":      "2",
		"class/net/dummy0/operstate":                      "unknown",
	})
	return root
}

func TestDevicesFromSysfsWithoutNetlink(t *testing.T) {
	withSysfs(t, fakeRXE(t))
	code, out, stderr := runIbgo(t, "devices")
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	require.Equal(t, []string{"device", "node", "GUID", "driver", "uverbs", "port", "link", "layer", "state", "netdev"}, strings.Fields(lines[0]))
	require.Equal(t, []string{"rxe0", "909ae9fffe06ef9b", "rxe", "uverbs0", "1", "Ethernet", "ACTIVE", "dummy0", "(Unknown)"}, strings.Fields(lines[1]))
}

func TestDevinfoUnknownDeviceListsDevices(t *testing.T) {
	withSysfs(t, fakeRXE(t))
	code, _, stderr := runIbgo(t, "devinfo", "-d", "mlx5_9")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "IB device 'mlx5_9' wasn't found (devices: rxe0)")
}

func TestDevinfoListAndBadPort(t *testing.T) {
	withSysfs(t, fakeRXE(t))
	code, out, _ := runIbgo(t, "devinfo", "-l")
	require.Equal(t, 0, code)
	require.Equal(t, "1 HCA found:\n\trxe0\n\n", out)
	code, _, stderr := runIbgo(t, "devinfo", "-i", "0")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "invalid port 0")
}
