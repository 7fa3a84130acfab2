//go:build linux

package perftest_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/testutil"
	"github.com/ibgo/ibgo/perftest"
)

// TestCompareServerProcess is the server side of TestCompare in a process
// of its own (so each side's CPU is its own); it does nothing unless
// TestCompare started it.
func TestCompareServerProcess(t *testing.T) {
	port, _ := strconv.Atoi(os.Getenv("IBGO_COMPARE_SERVER"))
	if port == 0 {
		t.Skip("the server half of TestCompare")
	}
	cfg := perftest.DefaultCompareConfig()
	cfg.Port = port
	cfg.Dev = os.Getenv("IBGO_VM_DEV")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := perftest.Compare(ctx, cfg)
	require.NoError(t, err)
}

// TestCompare (issue 32): `ibgo perf compare`'s measurements in the VM,
// server and client in two processes over soft-RoCE and its netdev. What
// holds on rxe and is checked: every test gives its figures, and the
// server's CPU per byte moved by an RDMA write is below what receiving
// the same bytes over TCP costs it (the written-to side does nothing).
// What was measured is logged as the table.
func TestCompare(t *testing.T) {
	vm := testutil.OneNode(t)
	rows := runCompare(t, vm, 18710, "write", 65536)
	by := map[string]perftest.CompareRow{}
	for _, r := range rows {
		by[r.Test] = r
	}
	require.Len(t, by, 4)
	for _, name := range []string{"tcp_bw", "rc_bw"} {
		require.Positive(t, by[name].Gbps, "%s bandwidth", name)
		require.Positive(t, by[name].ServerCPUPerGB+by[name].ClientCPUPerGB, "%s CPU per GB", name)
	}
	for _, name := range []string{"tcp_lat", "rc_lat"} {
		require.Positive(t, by[name].LatP50us, "%s latency", name)
		require.GreaterOrEqual(t, by[name].LatP99us, by[name].LatP50us, "%s p99 >= p50", name)
	}
	require.Less(t, by["rc_bw"].ServerCPUPerGB, by["tcp_bw"].ServerCPUPerGB,
		"the RDMA write's target spends less CPU per GB than a TCP receiver")

	// UD where asked: send_bw over UD, messages of at most the port's MTU
	rows = runCompare(t, vm, 18720, "ud", 1024)
	require.Equal(t, "ud_bw", rows[2].Test)
	require.Positive(t, rows[2].Gbps, "ud_bw bandwidth")
}

// runCompare runs the server in a process of its own and the client here.
func runCompare(t *testing.T, vm testutil.VMInfo, port int, verbs string, size int) []perftest.CompareRow {
	t.Helper()
	srv := exec.Command(os.Args[0], "-test.run=^TestCompareServerProcess$", "-test.v")
	srv.Env = append(os.Environ(), "IBGO_COMPARE_SERVER="+strconv.Itoa(port))
	var out bytes.Buffer
	srv.Stdout, srv.Stderr = &out, &out
	require.NoError(t, srv.Start())
	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()

	cfg := perftest.DefaultCompareConfig()
	cfg.Port, cfg.Server, cfg.Dev = port, vm.IP, vm.Dev
	cfg.Duration = time.Second
	cfg.LatIters = 1000
	cfg.Verbs, cfg.Size = verbs, size
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rows, err := perftest.Compare(ctx, cfg)
	require.NoError(t, err, "server output:\n%s", out.String())
	require.NoError(t, <-done, "server output:\n%s", out.String())
	var table bytes.Buffer
	perftest.WriteCompareTable(&table, rows)
	t.Logf("--verbs %s --size %d:\n%s", verbs, size, table.String())
	return rows
}
