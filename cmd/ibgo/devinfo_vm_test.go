//go:build linux

package main

import (
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/testutil"
)

// devinfoFields parses ibv_devinfo's layout into "section/key" -> value.
// Flag lists (lines of five tabs) are joined onto the key above them, and
// lines without a colon ("tag matching not supported") become keys.
func devinfoFields(t *testing.T, out string) (map[string]string, []string) {
	t.Helper()
	fields := map[string]string{}
	var order []string
	section, last := "", ""
	put := func(k, v string) {
		k = section + "/" + k
		if _, dup := fields[k]; dup {
			t.Fatalf("field %q printed twice", k)
		}
		fields[k] = v
		order = append(order, k)
		last = k
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		tabs := len(line) - len(strings.TrimLeft(line, "\t"))
		text := strings.TrimSpace(line)
		k, v, hasColon := strings.Cut(text, ":")
		switch {
		case strings.HasPrefix(text, "hca_id:"):
			section = "hca " + strings.TrimSpace(v)
			put("hca_id", strings.TrimSpace(v))
		case tabs == 2 && k == "port":
			section = "port " + strings.TrimSpace(v)
			put("port", strings.TrimSpace(v))
		case tabs == 5 && !strings.HasPrefix(text, "GID"):
			require.NotEmpty(t, last, "flag line %q before any field", line)
			fields[last] += " " + text
		case hasColon && !strings.HasPrefix(text, "GID"):
			put(k, strings.TrimSpace(v))
		case strings.HasPrefix(text, "GID["):
			i := strings.Index(text, "]:")
			require.Positive(t, i, line)
			put(text[:i+1], strings.TrimSpace(text[i+2:]))
		default:
			put(text, "")
		}
	}
	return fields, order
}

// TestDevinfoMatchesIbvDevinfo runs Debian's ibv_devinfo -v and ours on the
// same device and compares every field both print (GUIDs, firmware, limits,
// port state, MTUs, link layer, GIDs and their types); a field only one side
// prints is a failure too.
func TestDevinfoMatchesIbvDevinfo(t *testing.T) {
	vm := testutil.VM(t)
	path, err := exec.LookPath("ibv_devinfo")
	if err != nil {
		if testutil.Required() {
			t.Fatal("REQUIRE_VM=1 but ibv_devinfo is not on PATH")
		}
		t.Skip("ibv_devinfo (ibverbs-utils) not installed")
	}
	for _, args := range [][]string{{"-v"}, {"-v", "-d", vm.Dev}, {}, {"-d", vm.Dev, "-i", "1"}} {
		t.Run(strings.Join(append([]string{"args"}, args...), " "), func(t *testing.T) {
			cOut, err := exec.Command(path, args...).CombinedOutput()
			require.NoError(t, err, "ibv_devinfo %v: %s", args, cOut)
			code, goOut, stderr := runIbgo(t, append([]string{"devinfo"}, args...)...)
			require.Equal(t, 0, code, stderr)

			cf, corder := devinfoFields(t, string(cOut))
			gf, _ := devinfoFields(t, goOut)
			require.Contains(t, cf, "hca "+vm.Dev+"/node_guid")
			var diffs []string
			for _, k := range corder {
				g, ok := gf[k]
				switch {
				case !ok:
					diffs = append(diffs, fmt.Sprintf("%s: ibv_devinfo %q, ibgo does not print it", k, cf[k]))
				case g != cf[k]:
					diffs = append(diffs, fmt.Sprintf("%s: ibv_devinfo %q, ibgo %q", k, cf[k], g))
				}
			}
			var extra []string
			for k := range gf {
				if _, ok := cf[k]; !ok {
					extra = append(extra, k)
				}
			}
			sort.Strings(extra)
			for _, k := range extra {
				diffs = append(diffs, fmt.Sprintf("%s: ibgo prints %q, ibv_devinfo does not", k, gf[k]))
			}
			require.Empty(t, diffs, "ibgo devinfo %v differs from ibv_devinfo:\n%s", args, strings.Join(diffs, "\n"))
			t.Logf("%d fields compared, all equal", len(corder))
			if len(args) > 0 && args[0] == "-v" {
				// The fields the issue names must be among them.
				for _, k := range []string{"node_guid", "sys_image_guid", "fw_ver", "max_qp", "max_cqe", "max_mr", "atomic_cap"} {
					require.Contains(t, cf, "hca "+vm.Dev+"/"+k)
				}
				for _, k := range []string{"state", "max_mtu", "active_mtu", "link_layer", "GID[  0]", "GID[  1]"} {
					require.Contains(t, cf, "port 1/"+k)
				}
				require.Contains(t, cf["port 1/GID[  1]"], vm.IP)
				require.Contains(t, cf["port 1/GID[  1]"], "RoCE v2")
			}
		})
	}
}

func TestDevicesInVM(t *testing.T) {
	vm := testutil.VM(t)
	code, out, stderr := runIbgo(t, "devices")
	require.Equal(t, 0, code, stderr)
	var row []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == vm.Dev {
			row = f
		}
	}
	require.NotNil(t, row, "ibgo devices does not list %s:\n%s", vm.Dev, out)
	require.Equal(t, "rxe", row[2])
	require.Equal(t, "uverbs0", row[3])
	require.Equal(t, "ACTIVE", row[6])
	require.Equal(t, vm.Netdev, row[7])

	// ibv_devices prints the same node GUID.
	if cOut, err := exec.Command("ibv_devices").CombinedOutput(); err == nil {
		require.Contains(t, string(cOut), row[1])
	} else if testutil.Required() {
		t.Fatalf("ibv_devices: %v: %s", err, cOut)
	}

	code, _, stderr = runIbgo(t, "devinfo", "-d", "nosuchdev")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "devices: "+vm.Dev)
}
