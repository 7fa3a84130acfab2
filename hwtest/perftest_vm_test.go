//go:build linux

package hwtest

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/testutil"
	"github.com/ibgo/ibgo/perftest"
	"github.com/ibgo/ibgo/uverbs"
)

// TestPerftestLoopbackWriteBW runs write_bw through perftest's Go API, both
// sides in this process over the device's loopback: the client measures,
// the server receives the client's report over the out-of-band connection,
// and both return it as values.
func TestPerftestLoopbackWriteBW(t *testing.T) {
	vm := testutil.OneNode(t)
	cfg := perftest.DefaultConfig(perftest.Test{Verb: perftest.Write, Kind: perftest.BW})
	cfg.Dev = vm.Dev
	cfg.GIDIndex, cfg.GIDGiven = gidIndex(t, vm), true
	cfg.Port = 19917
	cfg.Size, cfg.SizeGiven = 4096, true
	cfg.Iters = 500
	srvCfg, cliCfg := cfg, cfg
	cliCfg.Server = vm.IP

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	type outcome struct {
		res *perftest.Result
		err error
	}
	srvDone := make(chan outcome, 1)
	go func() {
		r, err := perftest.Run(ctx, srvCfg)
		srvDone <- outcome{r, err}
	}()
	cli, err := perftest.Run(ctx, cliCfg) // retries until the server listens
	require.NoError(t, err)
	srv := <-srvDone
	require.NoError(t, srv.err)

	require.Len(t, cli.Records, 1)
	r := cli.Records[0]
	assert.Equal(t, "write_bw", r.Test)
	assert.Equal(t, "client", r.Role)
	assert.Equal(t, 4096, r.Size)
	assert.EqualValues(t, 500, r.Iterations)
	require.NotNil(t, r.BWAverage)
	require.NotNil(t, r.BWPeak)
	assert.Positive(t, *r.BWAverage)
	assert.GreaterOrEqual(t, *r.BWPeak, *r.BWAverage*0.99, "the peak is at least the average")
	assert.False(t, cli.BelowLimit)

	require.Len(t, srv.res.Records, 1, "the server has the client's report")
	s := srv.res.Records[0]
	assert.Equal(t, "server", s.Role)
	assert.Equal(t, *r.BWAverage, *s.BWAverage, "the report crossed the wire intact")
	assert.Equal(t, r.Iterations, s.Iterations)
}

// A cancelled context ends a server that waits for a client.
func TestPerftestRunCancelled(t *testing.T) {
	vm := testutil.OneNode(t)
	cfg := perftest.DefaultConfig(perftest.Test{Verb: perftest.Send, Kind: perftest.LAT})
	cfg.Dev = vm.Dev
	cfg.GIDIndex, cfg.GIDGiven = gidIndex(t, vm), true
	cfg.Port = 19918
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := perftest.Run(ctx, cfg)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 10*time.Second)
}

// TestPerftestDeviceByNetdev picks the device by its network interface (how
// SR-IOV VFs are known in a pod): the Go client names the netdev, finds the
// RDMA device and port behind it and its RoCE v2 GID on its own, and runs
// write_bw against Debian's C ib_write_bw serving on the device by name.
func TestPerftestDeviceByNetdev(t *testing.T) {
	vm := testutil.OneNode(t)
	require.NotEmpty(t, vm.Netdev)
	const port = 19919
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv := exec.CommandContext(ctx, cTool(t, "ib_write_bw"), "-d", vm.Dev, "-x", fmt.Sprint(gidIndex(t, vm)),
		"-p", fmt.Sprint(port), "-s", "4096", "-n", "300")
	var srvOut bytes.Buffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	require.NoError(t, srv.Start())

	cfg := perftest.DefaultConfig(perftest.Test{Verb: perftest.Write, Kind: perftest.BW})
	cfg.Dev = vm.Netdev
	cfg.Port = port
	cfg.Size, cfg.SizeGiven = 4096, true
	cfg.Iters = 300
	cfg.Server = vm.IP
	res, err := perftest.Run(ctx, cfg) // retries until the C server listens
	require.NoError(t, err, "C server:\n%s", srvOut.String())
	require.NoError(t, srv.Wait(), "C server:\n%s", srvOut.String())
	require.Len(t, res.Records, 1)
	assert.Equal(t, vm.Dev, res.Records[0].Device, "the device behind %s", vm.Netdev)
	require.NotNil(t, res.Records[0].BWAverage)
	assert.Positive(t, *res.Records[0].BWAverage)

	cfg.Dev = "no-such-netdev0"
	_, err = perftest.Run(ctx, cfg)
	require.ErrorIs(t, err, uverbs.ErrNoDevice)
}
