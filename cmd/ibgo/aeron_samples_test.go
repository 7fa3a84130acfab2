package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/aeron/media/udp"
)

func sampleDriver(t *testing.T, opts ...driver.Option) (*driver.Driver, *client.Client) {
	cfg := driver.DefaultConfig()
	cfg.Dir = filepath.Join(t.TempDir(), "aeron")
	cfg.IPCTermBufferLength = 64 << 10
	cfg.PublicationLingerTimeout = 10 * time.Millisecond
	d, err := driver.Start(cfg, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	c, err := client.Connect(context.Background(), client.Options{Dir: cfg.Dir})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return d, c
}

func TestAeronPubToGoSubscriber(t *testing.T) {
	d, c := sampleDriver(t)
	sub, err := c.AddSubscription(context.Background(), "aeron:ipc", 1001)
	require.NoError(t, err)
	var got []uint64
	var lengths []int
	done := make(chan struct{})
	go func() { // poll while the publisher runs: 200 KB do not fit the 32 KiB window
		defer close(done)
		asm := client.NewFragmentAssembler(func(p []byte, _ *client.Header) {
			lengths = append(lengths, len(p))
			got = append(got, binary.LittleEndian.Uint64(p))
		})
		for end := time.Now().Add(30 * time.Second); len(got) < 100 && time.Now().Before(end); {
			if sub.Poll(asm.Handler(), 10) == 0 {
				time.Sleep(10 * time.Microsecond)
			}
		}
	}()
	code, out, stderr := runIbgo(t, "aeron", "pub", "--dir", d.Dir(), "--messages", "100", "--length", "2000")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "offered 100 messages")
	<-done
	require.Len(t, got, 100)
	for i, s := range got {
		require.Equal(t, uint64(i), s)
		require.Equal(t, 2000, lengths[i])
	}
}

// publishSeqs offers the given sequence numbers once the sample subscriber
// is connected.
func publishSeqs(t *testing.T, c *client.Client, seqs ...uint64) {
	pub, err := c.AddPublication(context.Background(), "aeron:ipc", 1001)
	require.NoError(t, err)
	go func() {
		for !pub.IsConnected() {
			time.Sleep(time.Millisecond)
		}
		msg := make([]byte, 16)
		for _, s := range seqs {
			binary.LittleEndian.PutUint64(msg, s)
			for pub.Offer(msg) < 0 {
			}
		}
	}()
}

func TestAeronSubChecksSequence(t *testing.T) {
	for _, tc := range []struct {
		name string
		seqs []uint64
		args []string
		code int
		msg  string
	}{
		{"in order", []uint64{0, 1, 2}, []string{"--messages", "3"}, 0, ""},
		{"gap", []uint64{0, 2}, []string{"--messages", "3"}, 2, "gap: expected message 1, got 2"},
		{"duplicate", []uint64{0, 1, 1}, []string{"--messages", "3"}, 2, "duplicate: expected message 2, got 1 again"},
		{"timeout", []uint64{0}, []string{"--messages", "2", "--timeout", "300ms"}, 3, "timeout: no message for 300ms after 1 of 2 messages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, c := sampleDriver(t)
			publishSeqs(t, c, tc.seqs...)
			code, out, stderr := runIbgo(t, append([]string{"aeron", "sub", "--dir", d.Dir()}, tc.args...)...)
			require.Equal(t, tc.code, code, "stdout %q stderr %q", out, stderr)
			if tc.code == 0 {
				require.Contains(t, out, "received 3 messages in order")
			} else {
				require.Contains(t, stderr, tc.msg)
			}
		})
	}
}

func TestAeronPingAgainstGoPong(t *testing.T) {
	d, c := sampleDriver(t)
	sub, err := c.AddSubscription(context.Background(), "aeron:ipc", 1002)
	require.NoError(t, err)
	pub, err := c.AddPublication(context.Background(), "aeron:ipc", 1003)
	require.NoError(t, err)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		echo := func(p []byte, _ *client.Header) {
			for pub.Offer(p) < 0 && !pub.IsClosed() {
			}
		}
		for {
			select {
			case <-stop:
				return
			default:
			}
			if sub.Poll(echo, 10) == 0 {
				time.Sleep(10 * time.Microsecond)
			}
		}
	}()
	code, out, stderr := runIbgo(t, "aeron", "ping", "--dir", d.Dir(), "--messages", "100", "--warmup", "10", "--length", "256")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "round trips: 100 of 256 bytes")
	require.Regexp(t, `rtt min=\S+ p50=\S+ p90=\S+ p99=\S+ p99\.9=\S+ max=\S+`, out)
}

func TestAeronThroughputEmbedded(t *testing.T) {
	t.Setenv("AERON_IPC_TERM_BUFFER_LENGTH", "64k")
	dir := filepath.Join(t.TempDir(), "aeron")
	code, out, stderr := runIbgo(t, "aeron", "throughput", "--embedded", "--dir", dir, "--messages", "100000", "--length", "256")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "total: 100000 messages of 256 bytes")
	require.Contains(t, out, "M msg/s")
	// the publisher, subscriber and embedded driver allocate nothing per
	// message: an allocation of even 8 bytes each would be 800,000 here
	var cycles, allocated int
	_, err := fmt.Sscanf(out[strings.Index(out, "gc: "):], "gc: %d cycles, %d bytes allocated", &cycles, &allocated)
	require.NoError(t, err, out)
	t.Logf("during the run: %d collections, %d bytes allocated", cycles, allocated)
	require.Less(t, allocated, 256<<10, "bytes allocated while 100,000 messages went through")
}

func TestDriverCommandTerminatedByClient(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "aeron")
	type res struct {
		code     int
		out, err string
	}
	done := make(chan res, 1)
	go func() {
		code, out, stderr := runIbgo(t, "driver", "--dir", dir, "--ipc-term-length", "64k", "--termination-validator", "allow")
		done <- res{code, out, stderr}
	}()
	var f *cnc.File
	end := time.Now().Add(30 * time.Second)
	for {
		var err error
		if f, err = cnc.OpenFile(cnc.Path(dir), true); err == nil {
			break
		}
		require.True(t, time.Now().Before(end), "driver never created %s: %v", dir, err)
		time.Sleep(5 * time.Millisecond)
	}
	defer f.Close()
	rb, err := f.ToDriver()
	require.NoError(t, err)
	require.NoError(t, rb.Write(cnc.CmdTerminateDriver, cnc.AppendTerminateCommand(nil, cnc.TerminateCommand{Correlated: cnc.Correlated{ClientID: 1, CorrelationID: 2}})))
	select {
	case r := <-done:
		require.Equal(t, 0, r.code, r.err)
		require.Contains(t, r.out, "dir="+dir)
		require.Contains(t, r.out, "ipc-term-length=65536")
		require.Contains(t, r.out, "terminated by a client")
	case <-time.After(30 * time.Second):
		t.Fatal("driver did not terminate")
	}

	// A second driver in a live directory is refused; the flag overrides.
	d, err := driver.Start(func() driver.Config {
		c := driver.DefaultConfig()
		c.Dir = dir
		c.IPCTermBufferLength = 64 << 10
		return c
	}())
	require.NoError(t, err, "a cleanly stopped driver leaves a stale directory, replaced at once")
	defer d.Close()
	code, _, stderr := runIbgo(t, "driver", "--dir", dir)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "active driver detected")
	require.True(t, strings.Contains(stderr, "--dir-delete-on-start"))
	_, err = os.Stat(cnc.Path(dir))
	require.NoError(t, err)
}

// `ibgo aeron stat` and `errors` read an ibgo driver as they read Aeron's.
func TestAeronStatOfIbgoDriver(t *testing.T) {
	d, c := sampleDriver(t)
	pub, err := c.AddPublication(context.Background(), "aeron:ipc", 1001)
	require.NoError(t, err)
	sub, err := c.AddSubscription(context.Background(), "aeron:ipc", 1001)
	require.NoError(t, err)
	_, err = c.AddPublication(context.Background(), "aeron:udp?endpoint=localhost:40999", 1)
	require.Error(t, err)
	for end := time.Now().Add(30 * time.Second); sub.ImageCount() == 0 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	code, out, stderr := runIbgo(t, "aeron", "stat", "--dir", d.Dir())
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "Aeron Stat (CnC v0.2.0)")
	require.Regexp(t, `\n +0 : +0 - Bytes sent\n`, out)
	require.Regexp(t, `\n +15 : +1 - Errors: version=1.48.0 commit=ibgo\n`, out)
	require.Regexp(t, `\n +34 : +77,824 - Aeron software: version=1.48.0 commit=ibgo\n`, out)
	require.Contains(t, out, " - client-heartbeat: id=")
	require.Contains(t, out, " - pub-lmt: "+strconv.FormatInt(pub.OriginalRegistrationID(), 10)+" ")
	require.Contains(t, out, " - sub-pos: "+strconv.FormatInt(sub.RegistrationID(), 10)+" ")

	code, out, stderr = runIbgo(t, "aeron", "errors", "--dir", d.Dir())
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "aeron:udp channels are not supported by this driver yet")
	require.Contains(t, out, "1 distinct errors observed")
}

// TestAeronPubReportsDrain: on a network channel `ibgo aeron pub` waits for
// the driver to send everything and says so; when the only receiver goes
// away with bytes still unsent, it says how many and exits 4, and the
// driver counted and logged the same.
func TestAeronPubReportsDrain(t *testing.T) {
	for _, receiverLeaves := range []bool{false, true} {
		t.Run("receiver leaves "+strconv.FormatBool(receiverLeaves), func(t *testing.T) {
			d, c := sampleDriver(t, driver.WithMedia(udp.New(udp.Loss{})))
			port := freeUDPPort(t)
			// a 4 KiB receiver window: a subscriber that reads nothing holds the
			// sender back well before the 100 messages are sent
			channel := "aeron:udp?endpoint=127.0.0.1:" + strconv.Itoa(port) + "|term-length=64k|rcv-wnd=4096"
			sub, err := c.AddSubscription(context.Background(), channel, 1001)
			require.NoError(t, err)
			done := make(chan struct{})
			go func() {
				defer close(done)
				if receiverLeaves {
					time.Sleep(500 * time.Millisecond)
					sub.Close()
					return
				}
				n := 0
				for end := time.Now().Add(30 * time.Second); n < 100 && time.Now().Before(end); {
					if k := sub.Poll(func([]byte, *client.Header) {}, 10); k > 0 {
						n += k
					} else {
						time.Sleep(10 * time.Microsecond)
					}
				}
			}()
			if !receiverLeaves {
				// the publication is shared with a Go publication of the
				// same channel: the tool watches the driver's publication
				// all the same, and is done once its own bytes were sent
				shared, err := c.AddPublication(context.Background(), channel, 1001)
				require.NoError(t, err)
				defer shared.Close()
			}
			code, out, stderr := runIbgo(t, "aeron", "pub", "--dir", d.Dir(), "--channel", channel, "--messages", "100", "--length", "256")
			<-done
			if !receiverLeaves {
				require.Equal(t, 0, code, stderr)
				require.Contains(t, out, "drained: the driver sent all")
				return
			}
			require.Equal(t, 4, code, "stdout %q stderr %q", out, stderr)
			require.Contains(t, stderr, "LOSS: the driver ended publication")
			require.Contains(t, stderr, "bytes unsent")
			var texts []string
			f, err := cnc.OpenFile(cnc.Path(d.Dir()), false)
			require.NoError(t, err)
			defer f.Close()
			_, err = cnc.ReadErrorLog(f.ErrorLogBuffer(), 0, func(o cnc.Observation) { texts = append(texts, o.Text) })
			require.NoError(t, err)
			require.NotEmpty(t, texts)
			require.Contains(t, strings.Join(texts, "\n"), "bytes unsent")
		})
	}
}

// TestAeronSubReportsEndedShort: an image that goes unavailable before
// --messages arrived fails the subscriber, saying so.
func TestAeronSubReportsEndedShort(t *testing.T) {
	d, c := sampleDriver(t)
	pub, err := c.AddPublication(context.Background(), "aeron:ipc", 1001)
	require.NoError(t, err)
	go func() {
		for !pub.IsConnected() {
			time.Sleep(time.Millisecond)
		}
		msg := make([]byte, 16)
		for pub.Offer(msg) < 0 {
		}
		pub.Close()
	}()
	code, out, stderr := runIbgo(t, "aeron", "sub", "--dir", d.Dir(), "--messages", "3")
	require.Equal(t, 3, code, "stdout %q stderr %q", out, stderr)
	require.Contains(t, stderr, "went unavailable after 1 of 3 messages")
}

// freeUDPPort finds a UDP port free on loopback now.
func freeUDPPort(t *testing.T) int {
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer conn.Close()
	return conn.LocalAddr().(*net.UDPAddr).Port
}

// TestOneAeronDirectory: with USER unset (most containers), the driver,
// the Go client and the CLI resolve the same default directory (they used
// to disagree: aeron-root against aeron-default).
func TestOneAeronDirectory(t *testing.T) {
	t.Setenv("AERON_DIR", "")
	for _, set := range []bool{true, false} {
		t.Setenv("USER", "bob")
		if !set {
			require.NoError(t, os.Unsetenv("USER"))
		}
		d := driver.DefaultDir()
		require.Equal(t, d, client.DefaultDir(), "USER set %v", set)
		require.Equal(t, d, defaultAeronDir(), "USER set %v", set)
		cfg, err := driver.ConfigFromEnv(os.Getenv)
		require.NoError(t, err)
		require.Equal(t, d, cfg.Dir, "USER set %v", set)
	}
}

// TestAeronThroughputRoles: --role pub against a Go subscriber, then
// --role sub against a Go publisher (the CLI's commands are package state:
// one run at a time in a test binary; apart they are two processes): the
// publisher reports its total once a subscriber is there, the subscriber
// every message and byte.
func TestAeronThroughputRoles(t *testing.T) {
	d, c := sampleDriver(t)
	ctx := context.Background()
	const n = 100_000
	sub, err := c.AddSubscription(ctx, "aeron:ipc", 1001)
	require.NoError(t, err)
	got := make(chan int, 1)
	go func() {
		count := 0
		end := time.Now().Add(30 * time.Second)
		for count < n && time.Now().Before(end) {
			if sub.Poll(func([]byte, *client.Header) { count++ }, 256) == 0 {
				time.Sleep(10 * time.Microsecond)
			}
		}
		got <- count
	}()
	code, out, stderr := runIbgo(t, "aeron", "throughput", "--role", "pub", "--dir", d.Dir(), "-n", strconv.Itoa(n), "-l", "256")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "total: 100000 messages of 256 bytes")
	require.Equal(t, n, <-got, "the Go subscriber's count")
	require.NoError(t, sub.Close())

	pub, err := c.AddPublication(ctx, "aeron:ipc", 1002)
	require.NoError(t, err)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		msg := make([]byte, 256)
		for sent := 0; sent < n; {
			select {
			case <-stop:
				return
			default:
			}
			if pub.Offer(msg) > 0 {
				sent++
			} else {
				time.Sleep(10 * time.Microsecond)
			}
		}
	}()
	code, out, stderr = runIbgo(t, "aeron", "throughput", "--role", "sub", "--dir", d.Dir(), "--stream", "1002", "-n", strconv.Itoa(n))
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "subscriber total: 100000 messages, 25600000 bytes")

	code, _, stderr = runIbgo(t, "aeron", "throughput", "--role", "both-ish", "--dir", d.Dir())
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `--role "both-ish": both, pub or sub`)
}
