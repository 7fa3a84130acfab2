package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/perftest"
)

// Installed as a link named after a perftest program, ibgo is that program.
func TestPerftestProgramNames(t *testing.T) {
	for _, argv0 := range []string{"ib_send_lat", "/usr/local/bin/ib_send_lat", "./ib_send_lat"} {
		var out, errb bytes.Buffer
		code := run([]string{argv0, "-V"}, &out, &errb)
		require.Equal(t, 0, code, errb.String())
		require.Equal(t, "Version: "+perftest.Version+"\n", out.String())
	}
	var out, errb bytes.Buffer
	code := run([]string{"ib_write_bw", "-s", "0"}, &out, &errb)
	require.Equal(t, 1, code)
	require.Contains(t, errb.String(), "Size")
	_, ok := perftestProgram("ib_frobnicate")
	require.False(t, ok)
	_, ok = perftestProgram("ibgo")
	require.False(t, ok)
}

func TestPerfSubcommand(t *testing.T) {
	code, out, _ := runIbgo(t, "perf", "write_bw", "-V")
	require.Equal(t, 0, code)
	require.Equal(t, "Version: "+perftest.Version+"\n", out)

	code, out, _ = runIbgo(t, "perf", "read_lat", "--help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "Usage:")
	require.Contains(t, out, "ib_read_lat")

	code, _, stderr := runIbgo(t, "perf", "write_bandwidth")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `unknown test "write_bandwidth"`)
	require.Contains(t, stderr, "write_bw")

	code, out, _ = runIbgo(t, "perf")
	require.Equal(t, 1, code)
	require.Contains(t, out, "tests: write_bw")

	// A flag ibgo refuses says why, before looking for a device.
	code, _, stderr = runIbgo(t, "perf", "send_bw", "--odp")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "on-demand paging")

	code, out, _ = runIbgo(t, "perf", "send_bw", "--help")
	require.Equal(t, 0, code)
	for _, f := range []string{"-e, --events", "-g, --mcg", "-M, --MGID", "-z, --comm_rdma_cm", "-R, --rdma_cm"} {
		require.Contains(t, out, f)
	}
}
