//go:build linux

package hwtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/testutil"
	"github.com/ibgo/ibgo/uverbs"
)

// gidIndex finds the RoCE v2 GID of the VM's IP.
func gidIndex(t *testing.T, vm testutil.VMInfo) int {
	c, err := uverbs.Open(vm.Dev)
	require.NoError(t, err)
	defer c.Close()
	g, err := uverbs.ParseGID(vm.IP)
	require.NoError(t, err)
	i, err := c.GIDIndexForIP(1, g)
	require.NoError(t, err)
	return int(i)
}

func cTool(t *testing.T, name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		if testutil.Required() {
			t.Fatalf("REQUIRE_VM=1 but %s is not installed", name)
		}
		t.Skipf("%s not installed", name)
	}
	return p
}

// checkPattern verifies a payload is what Pattern writes.
func checkPattern(size int) func([]byte) error {
	want := make([]byte, size)
	Pattern(want)
	return func(b []byte) error {
		if !bytes.Equal(b, want) {
			i := 0
			for i < len(b) && i < len(want) && b[i] == want[i] {
				i++
			}
			return fmt.Errorf("payload of %d bytes differs from the expected %d at byte %d", len(b), len(want), i)
		}
		return nil
	}
}

// TestPingPongInterop runs our PingPong against Debian's ibv_rc_pingpong and
// ibv_ud_pingpong, in both roles, with data checked on both sides (the C
// programs check with -c, we check every receive).
func TestPingPongInterop(t *testing.T) {
	vm := testutil.OneNode(t)
	gidx := gidIndex(t, vm)
	const iters = 200
	for _, tc := range []struct {
		name string
		ud   bool
		size int
	}{{"rc", false, 4096}, {"ud", true, 1024}} {
		tool := cTool(t, "ibv_"+tc.name+"_pingpong")
		base := []string{"-d", vm.Dev, "-g", strconv.Itoa(gidx), "-n", strconv.Itoa(iters), "-s", strconv.Itoa(tc.size), "-c"}
		cfg := PingPong{Dev: vm.Dev, GIDIndex: gidx, Size: tc.size, Iters: iters, UD: tc.ud, Check: checkPattern(tc.size)}
		if !tc.ud {
			cfg.MTU = uverbs.MTU1024
		}

		t.Run("go-server-c-client-"+tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			ln, err := net.Listen("tcp", net.JoinHostPort(vm.IP, "18515"))
			require.NoError(t, err)
			defer ln.Close()
			type out struct {
				res *PingPongResult
				err error
			}
			ch := make(chan out, 1)
			go func() { r, err := cfg.Server(ctx, ln); ch <- out{r, err} }()
			cmd := exec.CommandContext(ctx, tool, append(base, vm.IP)...)
			cOut, cErr := cmd.CombinedOutput()
			o := <-ch
			require.NoError(t, o.err, "go server; C client said:\n%s", cOut)
			require.NoError(t, cErr, "C client:\n%s", cOut)
			require.Equal(t, iters, o.res.Sent)
			require.Equal(t, iters, o.res.Received)
			require.Contains(t, string(cOut), fmt.Sprintf("%d iters in", iters))
			t.Logf("C client: %s", strings.TrimSpace(string(cOut)))
		})

		t.Run("c-server-go-client-"+tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, tool, base...)
			var cOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &cOut, &cOut
			require.NoError(t, cmd.Start())
			res, err := cfg.Client(ctx, net.JoinHostPort(vm.IP, "18515"))
			werr := cmd.Wait()
			require.NoError(t, err, "go client; C server said:\n%s", cOut.String())
			require.NoError(t, werr, "C server:\n%s", cOut.String())
			require.Equal(t, iters, res.Sent)
			require.Equal(t, iters, res.Received)
			require.NotContains(t, cOut.String(), "invalid data", "the C server's -c check of our data")
			require.Contains(t, cOut.String(), fmt.Sprintf("%d iters in", iters))
			t.Logf("C server: %s", strings.TrimSpace(cOut.String()))
		})
	}
}

// Go against Go over the same protocol, both transports.
func TestPingPongGoGo(t *testing.T) {
	vm := testutil.OneNode(t)
	gidx := gidIndex(t, vm)
	for _, ud := range []bool{false, true} {
		cfg := PingPong{Dev: vm.Dev, GIDIndex: gidx, Iters: 100, UD: ud, RxDepth: 50}
		cfg.defaults()
		cfg.Check = checkPattern(cfg.Size)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		ln, err := net.Listen("tcp", net.JoinHostPort(vm.IP, "0"))
		require.NoError(t, err)
		errc := make(chan error, 1)
		go func() { _, err := cfg.Server(ctx, ln); errc <- err }()
		res, err := cfg.Client(ctx, ln.Addr().String())
		require.NoError(t, err)
		require.NoError(t, <-errc)
		require.Equal(t, 100, res.Received)
		ln.Close()
		cancel()
	}
}
