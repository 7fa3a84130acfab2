package hwtest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/testutil"
	"github.com/ibgo/ibgo/perftest"
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
