//go:build linux

package hwtest

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/testutil"
)

// Across the two-guest fabric (two qemu guests on a stream link, rxe0 on
// each eth0): node 1 serves, node 2 connects. Both guests run this binary.
func TestTwoNodePingPong(t *testing.T) {
	vm := testutil.TwoNodes(t)
	gidx := gidIndex(t, vm)
	for i, ud := range []bool{false, true} {
		name := map[bool]string{false: "rc", true: "ud"}[ud]
		t.Run(name, func(t *testing.T) {
			port := strconv.Itoa(18600 + i)
			cfg := PingPong{Dev: vm.Dev, GIDIndex: gidx, Iters: 200, UD: ud, RxDepth: 100}
			cfg.defaults()
			cfg.Check = checkPattern(cfg.Size)
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			var res *PingPongResult
			var err error
			if vm.Node == 1 {
				ln, lerr := net.Listen("tcp", net.JoinHostPort(vm.IP, port))
				require.NoError(t, lerr)
				defer ln.Close()
				res, err = cfg.Server(ctx, ln)
			} else {
				res, err = cfg.Client(ctx, net.JoinHostPort(vm.Peer, port))
			}
			require.NoError(t, err)
			require.Equal(t, 200, res.Sent)
			require.Equal(t, 200, res.Received)
			require.Equal(t, vm.Peer, res.Remote.GID.IP().String(), "the peer's GID is the other guest's address")
			t.Logf("node %d: %d exchanges of %d bytes with %s in %v", vm.Node, res.Received, cfg.Size, vm.Peer, res.Elapsed)
		})
	}
}

// Across the fabric against the C program: node 1 runs Debian's
// ibv_rc_pingpong as the server, node 2 our client.
func TestTwoNodePingPongAgainstC(t *testing.T) {
	vm := testutil.TwoNodes(t)
	gidx := gidIndex(t, vm)
	tool := cTool(t, "ibv_rc_pingpong")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if vm.Node == 1 {
		out, err := exec.CommandContext(ctx, tool, "-d", vm.Dev, "-g", strconv.Itoa(gidx), "-n", "100", "-c", "-p", "18610").CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.NotContains(t, string(out), "invalid data")
		require.Contains(t, string(out), "100 iters in")
		return
	}
	cfg := PingPong{Dev: vm.Dev, GIDIndex: gidx, Iters: 100, Size: 4096}
	cfg.Check = checkPattern(4096)
	res, err := cfg.Client(ctx, net.JoinHostPort(vm.Peer, "18610"))
	require.NoError(t, err)
	require.Equal(t, 100, res.Received)
}
