package main

import (
	"bytes"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/uverbs"
)

func TestAeronSubcommandsRegistered(t *testing.T) {
	var names []string
	for _, c := range commands {
		if c.Name == "aeron" {
			for _, s := range c.Subcommands {
				names = append(names, s.Name)
			}
		}
	}
	require.Contains(t, names, "health")
	require.Contains(t, names, "metrics")
}

// newCnC writes a small CnC file as a driver would, with the driver's
// heartbeat at hb (epoch ms; 0 leaves it unset).
func newCnC(t *testing.T, hb int64) (string, *cnc.File) {
	dir := t.TempDir()
	l := cnc.Layout{ToDriverCapacity: 1024, ToClientsCapacity: 1024, CounterValuesLength: 64 * cnc.CounterValueLength,
		ErrorLogLength: 4096, PID: 4242, StartTimestamp: time.Now()}
	f, err := cnc.Create(cnc.Path(dir), l)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	if hb != 0 {
		rb, err := f.ToDriver()
		require.NoError(t, err)
		rb.SetConsumerHeartbeatTime(hb)
	}
	return dir, f
}

func TestAeronHealth(t *testing.T) {
	dir, _ := newCnC(t, time.Now().UnixMilli())
	code, out, stderr := runIbgo(t, "aeron", "health", "--dir", dir)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "driver alive: pid 4242, heartbeat ")
	code, out, _ = runIbgo(t, "aeron", "health", "-q", "--dir", dir)
	require.Equal(t, 0, code)
	require.Empty(t, out)

	stale, _ := newCnC(t, time.Now().Add(-time.Minute).UnixMilli())
	code, _, stderr = runIbgo(t, "aeron", "health", "--dir", stale)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "driver heartbeat is 1m0")
	require.Contains(t, stderr, "old (limit 10s;")
	require.Contains(t, stderr, "pid 4242): the driver is dead or stalled")
	code, _, _ = runIbgo(t, "aeron", "health", "--dir", stale, "--timeout", "2m")
	require.Equal(t, 0, code, "a longer --timeout accepts it")

	starting, _ := newCnC(t, 0)
	code, _, stderr = runIbgo(t, "aeron", "health", "--dir", starting)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "has not written a heartbeat yet")

	code, _, stderr = runIbgo(t, "aeron", "health", "--dir", t.TempDir())
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "no CnC file at")

	code, _, stderr = runIbgo(t, "aeron", "health", "--dir", dir, "--timeout", "0s")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "--timeout 0s must be positive")
}

func TestPickNetdev(t *testing.T) {
	devs := []*uverbs.Device{
		{Name: "mlx5_0", Ports: []uverbs.PortInfo{{Port: 1, Netdev: "net1"}}},
		{Name: "mlx5_1", Ports: []uverbs.PortInfo{{Port: 1, Netdev: "net2"}, {Port: 2, Netdev: "net3"}}},
		{Name: "mlx5_2", Ports: []uverbs.PortInfo{{Port: 1}}},
		{Name: "rxe0", Ports: []uverbs.PortInfo{{Port: 1, Netdev: "bond0"}}},
		{Name: "rxe1", Ports: []uverbs.PortInfo{{Port: 1, Netdev: "bond0"}}},
	}
	d, p, err := pickNetdev(devs, "net3")
	require.NoError(t, err)
	require.Equal(t, "mlx5_1", d.Name)
	require.Equal(t, uint32(2), p.Port)

	_, _, err = pickNetdev(devs, "eth9")
	require.EqualError(t, err, `no RDMA device is bound to network interface "eth9" (interfaces with an RDMA device: bond0, net1, net2, net3); `+"`ibgo devices` shows the mapping")
	_, _, err = pickNetdev(devs, "bond0")
	require.EqualError(t, err, `network interface "bond0" is bound to several RDMA ports (rxe0 port 1, rxe1 port 1): choose one with -d/--ib-dev`)
	_, _, err = pickNetdev(devs[2:3], "net1")
	require.ErrorContains(t, err, "(no RDMA port has a network interface)")
}

func TestDevicesByNetdev(t *testing.T) {
	withSysfs(t, fakeRXE(t))
	code, out, stderr := runIbgo(t, "devices", "--netdev", "dummy0", "-q")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "rxe0 1\n", out)
	for _, args := range [][]string{{"-d", "dummy0"}, {"-d", "rxe0"}, {"--netdev", "dummy0"}} {
		code, out, stderr = runIbgo(t, append([]string{"devices"}, args...)...)
		require.Equal(t, 0, code, stderr)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 2, "%v: %s", args, out)
		require.Equal(t, "rxe0", strings.Fields(lines[1])[0])
	}
	code, _, stderr = runIbgo(t, "devices", "-d", "rxe0", "--netdev", "dummy0")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "not both")
	code, _, stderr = runIbgo(t, "devices", "--netdev", "eth2")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `no RDMA device is bound to network interface "eth2" (interfaces with an RDMA device: dummy0)`)
}

func TestPerfJob(t *testing.T) {
	withSysfs(t, fakeRXE(t))
	old := uverbs.DevRoot
	uverbs.DevRoot = t.TempDir() // no char devices: perf itself fails, after perfjob chose its arguments
	t.Cleanup(func() { uverbs.DevRoot = old })

	t.Setenv("JOB_COMPLETION_INDEX", "")
	code, _, stderr := runIbgo(t, "perfjob", "--", "write_bw")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "no --index and no JOB_COMPLETION_INDEX")

	t.Setenv("JOB_COMPLETION_INDEX", "1")
	t.Setenv("IBGO_PEER", "")
	code, _, stderr = runIbgo(t, "perfjob", "--", "write_bw")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "index 1 is a client and needs the server's name")

	code, _, stderr = runIbgo(t, "perfjob", "--netdev", "dummy0", "--", "write_bw", "-d", "mlx5_0")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "give either --netdev dummy0 or -d/--ib-dev, not both")

	t.Setenv("IBGO_PEER", "job-0.svc")
	_, _, stderr = runIbgo(t, "perfjob", "--netdev", "dummy0", "--", "write_bw", "-D", "5")
	require.Contains(t, stderr, "perfjob: index 1 runs: perf write_bw -d rxe0 -i 1 -D 5 --connect_timeout=600 job-0.svc\n")

	t.Setenv("IBGO_NETDEV", "dummy0")
	_, _, stderr = runIbgo(t, "perfjob", "--index", "0", "--", "read_lat", "-i", "1")
	require.Contains(t, stderr, "perfjob: index 0 runs: perf read_lat -d rxe0 -i 1\n")
	_, _, stderr = runIbgo(t, "perfjob", "--", "send_bw", "--connect_timeout=5")
	require.Contains(t, stderr, "perfjob: index 1 runs: perf send_bw -d rxe0 -i 1 --connect_timeout=5 job-0.svc\n")

	t.Setenv("JOB_COMPLETION_INDEX", "x")
	code, _, stderr = runIbgo(t, "perfjob", "--", "write_bw")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `JOB_COMPLETION_INDEX="x" is not a completion index`)
}

func TestAeronMetricsServes(t *testing.T) {
	dir, _ := newCnC(t, time.Now().UnixMilli())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var logs bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- serveMetrics(ctx, ln, dir, log.New(&logs, "", 0)) }()

	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	require.Contains(t, string(body), "\naeron_driver_up 1\n")
	require.Contains(t, string(body), `aeron_cnc_info{cnc_version="0.2.0",pid="4242"} 1`)

	resp, err = http.Get("http://" + ln.Addr().String() + "/nothing")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 404, resp.StatusCode)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("serveMetrics did not return after its context ended")
	}
	require.Empty(t, logs.String())

	code, _, stderr := runIbgo(t, "aeron", "metrics", "--listen", "256.0.0.1:1", "--dir", dir)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "metrics: cannot listen on 256.0.0.1:1")
}
