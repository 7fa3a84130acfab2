//go:build linux

package perftest

import (
	"bytes"
	"context"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/testutil"
)

// goSideResult runs ibgo's test in this process as Main does, and keeps
// the Result's event count in events.
func goSideResult(events *atomic.Uint64) func(Test, []string) side {
	return func(t Test, args []string) side {
		var o, e bytes.Buffer
		cmd, err := ParseArgs(t, "ib_"+t.Name(), args)
		if err != nil {
			PrintError(&o, &e, err)
			return side{1, o.String(), e.String()}
		}
		for _, n := range cmd.Notices {
			o.WriteString(n)
		}
		cfg := cmd.Config
		cfg.Stdout, cfg.Stderr = &o, &e
		res, err := Run(context.Background(), cfg)
		if err != nil {
			PrintError(&o, &e, err)
			return side{1, o.String(), e.String()}
		}
		events.Store(res.CQEvents)
		return side{0, o.String(), e.String()}
	}
}

// TestEventsInterop runs -e (completion events) against Debian's perftest
// -e, both roles, for the bandwidth and latency tests that have it. Both
// sides must exit 0 with perftest's layout (the banner's "Test with events"
// line included), the Go client's numbers must parse, and the Go side must
// have slept on completion events (a Go side that spun on its CQs would
// count none).
func TestEventsInterop(t *testing.T) {
	vm := testutil.OneNode(t)
	for _, tc := range []interopCase{
		{"send_bw", "send_bw", []string{"-e", "-n", "300"}, 1},
		{"send_bw_ud", "send_bw", []string{"-e", "-c", "UD", "-n", "300", "-s", "1024"}, 1},
		{"send_bw_s1k_q2", "send_bw", []string{"-e", "-n", "300", "-s", "1024", "-q", "2"}, 1},
		{"send_lat", "send_lat", []string{"-e", "-n", "300"}, 1},
		{"send_lat_ud", "send_lat", []string{"--events", "-c", "UD", "-n", "200", "-s", "512"}, 1},
		{"read_bw", "read_bw", []string{"-e", "-n", "300"}, 1},
		{"read_lat", "read_lat", []string{"-e", "-n", "300"}, 1},
		{"atomic_bw", "atomic_bw", []string{"-e", "-X", "0", "-n", "300"}, 1},
		{"atomic_lat", "atomic_lat", []string{"-e", "-n", "300"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			test, ok := TestByName(tc.test)
			require.True(t, ok)
			var srvEv, cliEv atomic.Uint64
			gs, cc := pairWith(t, vm, test, true, tc.args, goSideResult(&srvEv))
			require.Equal(t, 0, gs.code, "Go server: %s\nC client: %s", gs, cc)
			require.Equal(t, 0, cc.code, "C client: %s\nGo server: %s", cc, gs)
			cs, gc := pairWith(t, vm, test, false, tc.args, goSideResult(&cliEv))
			require.Equal(t, 0, gc.code, "Go client: %s\nC server: %s", gc, cs)
			require.Equal(t, 0, cs.code, "C server: %s\nGo client: %s", cs, gc)

			for _, s := range []side{cs, cc, gs, gc} {
				require.Contains(t, s.stdout, " Test with events. Using "+vm.Dev+"_comp0\n", "banner:\n%s", s.stdout)
			}
			assert.Equal(t, shape(cs.stdout), shape(gs.stdout), "server stdout layout (C then Go)\nC:\n%s\nGo:\n%s", cs.stdout, gs.stdout)
			assert.Equal(t, shape(cc.stdout), shape(gc.stdout), "client stdout layout (C then Go)\nC:\n%s\nGo:\n%s", cc.stdout, gc.stdout)
			require.Len(t, resultRows(gc.stdout), tc.rows, "Go client result rows:\n%s", gc.stdout)
			require.Len(t, resultRows(cc.stdout), tc.rows, "C client result rows:\n%s", cc.stdout)
			checkNumbers(t, test, tc, resultRows(gc.stdout))

			assert.Positive(t, cliEv.Load(), "the Go client waited for no completion event")
			// The RDMA servers (read, atomic) only wait for the client's
			// end handshake: no CQ, no events.
			if test.Verb == Send {
				assert.Positive(t, srvEv.Load(), "the Go server waited for no completion event")
			} else {
				assert.Zero(t, srvEv.Load(), "a passive RDMA server has no completions to wait for")
			}
			t.Logf("events: Go server %d, Go client %d; Go client:\n%sC client:\n%s", srvEv.Load(), cliEv.Load(),
				lastRows(gc.stdout), lastRows(cc.stdout))
		})
	}
}

// noEvents: without -e nothing waits on a channel (the count is what the
// events test relies on).
func TestNoEventsWithoutFlag(t *testing.T) {
	vm := testutil.OneNode(t)
	test, _ := TestByName("send_lat")
	var srvEv, cliEv atomic.Uint64
	srv, cli := ibgoPairWith(t, vm, test, []string{"-n", "200"}, goSideResult(&srvEv), goSideResult(&cliEv))
	require.Equal(t, 0, srv.code, "server: %s", srv)
	require.Equal(t, 0, cli.code, "client: %s", cli)
	assert.Zero(t, srvEv.Load())
	assert.Zero(t, cliEv.Load())
	srv, cli = ibgoPairWith(t, vm, test, []string{"-n", "200", "-e"}, goSideResult(&srvEv), goSideResult(&cliEv))
	require.Equal(t, 0, srv.code, "server: %s", srv)
	require.Equal(t, 0, cli.code, "client: %s", cli)
	// Each ping-pong iteration waits at least once for the peer's message.
	assert.GreaterOrEqual(t, srvEv.Load(), uint64(100))
	assert.GreaterOrEqual(t, cliEv.Load(), uint64(100))
}

// ibgoPairWith runs server and client of test in this process, each side
// by its own function.
func ibgoPairWith(t *testing.T, vm testutil.VMInfo, test Test, args []string, srvRun, cliRun func(Test, []string) side) (srv, cli side) {
	t.Helper()
	nextPort++
	common := append([]string{"-d", vm.Dev, "-x", strconv.Itoa(gid(t, vm)), "-p", strconv.Itoa(nextPort)}, args...)
	done := make(chan side, 1)
	go func() { done <- srvRun(test, slices.Clone(common)) }()
	for !listening(nextPort) {
		time.Sleep(10 * time.Millisecond)
	}
	cli = cliRun(test, append(slices.Clone(common), vm.IP))
	select {
	case srv = <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("server did not finish; client: %s", cli)
	}
	return srv, cli
}
