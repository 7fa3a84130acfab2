//go:build linux

package ib_test

import (
	"context"
	"fmt"
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
	"github.com/ibgo/ibgo/aeron/media/ib"
	"github.com/ibgo/ibgo/aeron/media/udp"
	"github.com/ibgo/ibgo/internal/testutil"
)

// TestTwoNodePublishThenExit (issue 27): node 1's publisher offers a
// stream and its client exits right after the last offer; node 2's
// subscriber must get every message, once and in order, over aeron:udp,
// aeron:ib UD and aeron:ib RC (ib-mode=send and write), on a clean link and with tc netem on both
// guests' ends (5 % loss, 2 % duplication, 2 ms delay with reordering). The
// publisher's driver drains on its own; neither driver may count or log a
// stream that ended short. IBGO_LIFECYCLE_MESSAGES sets the count on the
// clean link (1,000,000 by default), IBGO_LIFECYCLE_NETEM_MESSAGES under
// netem (a tenth of that by default, to stay within make test's time).
func TestTwoNodePublishThenExit(t *testing.T) {
	vm := testutil.TwoNodes(t)
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("IBGO_LIFECYCLE_MESSAGES")); err == nil && v > 0 {
		n = v
	}
	netemN := max(n/10, 1)
	if v, err := strconv.Atoi(os.Getenv("IBGO_LIFECYCLE_NETEM_MESSAGES")); err == nil && v > 0 {
		netemN = v
	}
	cases := []struct {
		name, channel string
		netem         bool
	}{
		{"udp", "aeron:udp?endpoint=%s:24701", false},
		{"ib-ud", "aeron:ib?endpoint=%s:24703|mtu=1024", false},
		{"ib-rc", "aeron:ib?endpoint=%s:24705|ib-qp=rc|mtu=4096", false},
		{"udp-netem", "aeron:udp?endpoint=%s:24707", true},
		{"ib-ud-netem", "aeron:ib?endpoint=%s:24709|mtu=1024", true},
		{"ib-rc-netem", "aeron:ib?endpoint=%s:24711|ib-qp=rc|mtu=4096", true},
		{"ib-rc-write", "aeron:ib?endpoint=%s:24713|ib-qp=rc|ib-mode=write|mtu=4096", false},
		{"ib-rc-write-netem", "aeron:ib?endpoint=%s:24715|ib-qp=rc|ib-mode=write|mtu=4096", true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			count := n
			if tc.netem {
				count = netemN
				netem(t, vm.Netdev, "delay", "2ms", "reorder", "25%", "50%", "loss", "5%", "duplicate", "2%")
			}
			d := startBothMedia(t)
			donePort := 24750 + i
			ctx := context.Background()
			if vm.Node == 2 {
				c := connectTo(t, d)
				sub, err := c.AddSubscription(ctx, fmt.Sprintf(tc.channel, vm.IP), 1001)
				require.NoError(t, err)
				start := time.Now()
				if err := untilEnded(newReceiver(sub, 0), count, 4*deadline); err != nil {
					// what the subscriber's driver saw, for the post-mortem
					text, _ := errorLog(t, d)
					t.Fatalf("node 2, %s: %v; NAKs sent %d, heartbeats received %d; error log:\n%s", tc.name, err,
						systemCounter(t, d, "NAKs sent"), systemCounter(t, d, "Heartbeats received"), text)
				}
				t.Logf("node 2 %s: %d messages of 256 B once and in order in %v", tc.name, count, time.Since(start).Round(time.Millisecond))
				requireNothingShort(t, d)
				sendDone(t, vm.Peer, donePort, "done")
				return
			}
			ln := listenDone(t, vm.IP, donePort)
			c, err := client.Connect(ctx, client.Options{Dir: d.Dir(), IdleSleep: 100 * time.Microsecond})
			require.NoError(t, err)
			pub, err := c.AddPublication(ctx, fmt.Sprintf(tc.channel, vm.Peer), 1001)
			require.NoError(t, err)
			waitUntil(t, "the subscriber on node 2", deadline, pub.IsConnected)
			offerAll(t, pub, 0, count, 8*deadline)
			require.NoError(t, c.Close()) // the publisher exits; its driver drains
			line, err := awaitDone(ln, 8*deadline)
			require.NoError(t, err, "waiting for node 2")
			require.Equal(t, "done", line)
			requireNothingShort(t, d)
		})
	}
}

// untilEnded is receiver.until that also fails, at once, when the image
// goes unavailable before n messages arrived: the driver announces that
// only once the subscriber read all it had, so the rest was lost.
func untilEnded(r *receiver, n int, limit time.Duration) error {
	end := time.Now().Add(limit)
	seen := false
	for r.count() < n {
		if r.sub.Poll(r.fh, 256) == 0 {
			if seen && r.sub.ImageCount() == 0 && r.sub.Poll(r.fh, 256) == 0 {
				return fmt.Errorf("the image went unavailable after %d of %d messages: the end of the stream was lost", r.count(), n)
			}
			seen = seen || r.sub.ImageCount() > 0
			time.Sleep(50 * time.Microsecond)
		}
		if r.bad != nil {
			return r.bad
		}
		if time.Now().After(end) {
			return fmt.Errorf("received %d of %d", r.count(), n)
		}
	}
	return nil
}

// startBothMedia starts a driver serving aeron:udp and aeron:ib. The term
// is the default 16 MiB, so a publisher that exits leaves up to 8 MiB for
// its driver to send; the unblock timeout is 2 s, so that drain outlasts
// it here as it outlasts the default 15 s on a slower link (where ibgo's
// drain used to give up and lose the end of the stream).
func startBothMedia(t *testing.T) *driver.Driver {
	cfg := driver.DefaultConfig()
	cfg.Dir = filepath.Join(t.TempDir(), "aeron")
	cfg.PublicationUnblockTimeout = 2 * time.Second
	cfg.TimerInterval = 50 * time.Millisecond
	// The default 5 s linger: a closed publication answers NAKs for its
	// tail while it lingers (a unicast receiver's EOS status message ends
	// it as soon as the image has everything). A 100 ms linger lost the
	// last UD datagram on a loaded machine: the image then ended, counted
	// and logged, as the publisher's silence says it must.
	d, err := driver.Start(cfg, driver.WithMedia(udp.New(udp.Loss{})), driver.WithMedia(ib.New()))
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

// requireNothingShort: the driver counted no stream that ended short and
// its error log says nothing of one.
func requireNothingShort(t *testing.T, d *driver.Driver) {
	t.Helper()
	f, err := cnc.OpenFile(cnc.Path(d.Dir()), false)
	require.NoError(t, err)
	defer f.Close()
	r, err := f.Counters()
	require.NoError(t, err)
	var short int64
	r.ForEach(func(c cnc.Counter) bool {
		if c.TypeID == cnc.TypeSystem && (strings.HasPrefix(c.Label, "Publications ended with data unsent") || strings.HasPrefix(c.Label, "Images ended without end of stream")) {
			short += c.Value
		}
		return true
	})
	var texts []string
	_, err = cnc.ReadErrorLog(f.ErrorLogBuffer(), 0, func(o cnc.Observation) { texts = append(texts, o.Text) })
	require.NoError(t, err)
	require.Zero(t, short, "a stream ended short; error log:\n%s", strings.Join(texts, "\n"))
}
