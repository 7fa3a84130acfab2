package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/protocol"
)

// TestMetricsAndHealthOfRunningDriver scrapes `ibgo aeron metrics` against a
// running media driver with a live IPC stream, parses the exposition with
// the Prometheus text parser, and checks the numbers follow what happened:
// the stream's publisher and subscriber positions equal the bytes sent,
// the client is counted, and `ibgo aeron health` passes while the driver
// runs and fails once it has stopped.
func TestMetricsAndHealthOfRunningDriver(t *testing.T) {
	cfg := driver.DefaultConfig()
	cfg.Dir = filepath.Join(t.TempDir(), "aeron")
	cfg.IPCTermBufferLength = 64 << 10
	cfg.PublicationLingerTimeout = 100 * time.Millisecond
	cfg.TimerInterval = 50 * time.Millisecond
	d, err := driver.Start(cfg)
	require.NoError(t, err)
	defer d.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, client.Options{Dir: cfg.Dir})
	require.NoError(t, err)
	defer c.Close()
	const stream, n, size = 4711, 100, 200
	sub, err := c.AddSubscription(ctx, "aeron:ipc", stream)
	require.NoError(t, err)
	pub, err := c.AddPublication(ctx, "aeron:ipc", stream)
	require.NoError(t, err)
	msg := make([]byte, size)
	for sent := 0; sent < n; {
		require.NoError(t, ctx.Err(), "offering")
		if pub.Offer(msg) > 0 {
			sent++
		}
	}
	got := 0
	for got < n {
		require.NoError(t, ctx.Err(), "polling")
		got += sub.Poll(func([]byte, *client.Header) {}, 10)
	}
	// Each message is one frame: header plus payload, aligned to 32 bytes.
	frame := (protocol.DataHeaderLength + size + 31) &^ 31
	want := float64(n * frame)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srvCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveMetrics(srvCtx, ln, cfg.Dir, log.New(io.Discard, "", 0)) }()
	defer func() { stop(); <-done }()

	var fams map[string]*dto.MetricFamily
	// Positions are published by the driver's conductor on its own cadence:
	// scrape until the subscriber position has caught up.
	for {
		fams = scrape(t, "http://"+ln.Addr().String()+"/metrics")
		if v, ok := sample(fams, "aeron_stream_position_bytes", map[string]string{"type": "sub-pos", "stream_id": fmt.Sprint(stream)}); ok && v == want {
			break
		}
		require.NoError(t, ctx.Err(), "waiting for sub-pos %v in the metrics", want)
		time.Sleep(20 * time.Millisecond)
	}
	up, ok := sample(fams, "aeron_driver_up", nil)
	require.True(t, ok)
	require.Equal(t, 1.0, up)
	pubPos, ok := sample(fams, "aeron_stream_position_bytes", map[string]string{"type": "pub-lmt", "stream_id": fmt.Sprint(stream)})
	require.True(t, ok, "a pub-lmt row for the stream")
	require.GreaterOrEqual(t, pubPos, want, "the publication limit is at or ahead of what was sent")
	clients, ok := sample(fams, "aeron_clients", nil)
	require.True(t, ok)
	require.Equal(t, 1.0, clients)

	code, _, stderr := runIbgo(t, "aeron", "health", "--dir", cfg.Dir)
	require.Equal(t, 0, code, stderr)
	require.NoError(t, c.Close())
	require.NoError(t, d.Close())
	code, _, _ = runIbgo(t, "aeron", "health", "--dir", cfg.Dir)
	require.NotEqual(t, 0, code, "health after the driver stopped")
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// sample returns the value of the first sample of name whose labels include
// want.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && labels[k] == v
		}
		if !match {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}
