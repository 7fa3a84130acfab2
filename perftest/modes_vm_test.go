//go:build linux

package perftest

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/testutil"
	"github.com/ibgo/ibgo/uverbs"
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
		// -t 512: perftest's send_lat -e waits for an event before it
		// polls its send CQ, and when the event was the receive CQ's it
		// moves on with the send completion left in the CQ; with the
		// default TX depth of 1 that CQ overflows (rxe: "rxe_cq_post: queue
		// full") and the C side hangs (seen on 6.12, where completions
		// arrive later than on 6.1). A CQ as deep as the run avoids it.
		{"send_lat", "send_lat", []string{"-e", "-n", "300", "-t", "512"}, 1},
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
			gs, cc := pairCWith(t, vm, test, true, tc.args, goSideResult(&srvEv))
			require.Equal(t, 0, gs.code, "Go server: %s\nC client: %s", gs, cc)
			require.Equal(t, 0, cc.code, "C client: %s\nGo server: %s", cc, gs)
			cs, gc := pairCWith(t, vm, test, false, tc.args, goSideResult(&cliEv))
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

			// A side sleeps only when a poll finds its CQ empty. Where it
			// waits for the peer's messages (send_bw's receiver, both
			// send_lat sides) that happens every few messages. A requester's
			// own completions may already be there: rxe on 6.1 runs a
			// loopback RC operation to its completion inside the post
			// system call, so the read/atomic/send_bw requester may never
			// need to sleep.
			if test.Verb == Send {
				assert.Positive(t, srvEv.Load(), "the Go server (receiver) never slept on a completion event")
			} else {
				assert.Zero(t, srvEv.Load(), "a passive RDMA server has no completions to wait for")
			}
			if test.Verb == Send && test.Kind == LAT {
				assert.Positive(t, cliEv.Load(), "the Go send_lat client never slept on a completion event")
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

// ipv6GID finds the device's link-local (fe80::) RoCE v2 GID: perftest's
// multicast on RoCE needs a GID of the MGID's kind (an IPv4-mapped one
// fails its GID type check on both sides).
func ipv6GID(t *testing.T, vm testutil.VMInfo) int {
	t.Helper()
	c, err := uverbs.Open(vm.Dev)
	require.NoError(t, err)
	defer c.Close()
	gids, err := c.QueryGIDTable()
	require.NoError(t, err)
	for _, g := range gids {
		if g.Port == 1 && g.GID[0] == 0xfe && g.GID[1] == 0x80 && g.Type == uverbs.GIDTypeRoCEv2 {
			return int(g.Index)
		}
	}
	t.Skipf("%s has no fe80:: RoCE v2 GID (IPv6 off in the guest?)", vm.Dev)
	return -1
}

// mgidAllNodes is ff02::1 in -M's form. Linux joins every interface to
// the all-nodes group, so rxe on any kernel delivers a looped-back
// datagram for it; perftest's default group (ff01:0:0:2:c985::, scope
// interface-local) is dropped by rxe on 6.1, which only adds the Ethernet
// multicast address and joins no IPv6 group.
const mgidAllNodes = "255:2:0:0:0:0:0:0:0:0:0:0:0:0:0:1"

// TestMcastInterop runs send_bw -g against Debian's perftest -g, both
// roles: the receiver attaches its UD QP to the group and advertises it
// (MGID, QPN 0xffffff), the sender sends to the group, every message
// arrives (a message only reaches a QP attached to the group: the
// destination QPN is the multicast one), both exit 0 with perftest's
// layout.
func TestMcastInterop(t *testing.T) {
	vm := testutil.OneNode(t)
	x := strconv.Itoa(ipv6GID(t, vm))
	for _, tc := range []interopCase{
		{"send_bw_ff02", "send_bw", []string{"-g", "-x", x, "-M", mgidAllNodes, "-n", "300", "-s", "1024"}, 1},
		{"send_bw_ff02_events", "send_bw", []string{"-g", "-e", "-x", x, "-M", mgidAllNodes, "-n", "200", "-s", "512"}, 1},
		// Both latency sides attach to the group and send to it.
		{"send_lat_ff02", "send_lat", []string{"-g", "-x", x, "-M", mgidAllNodes, "-n", "200"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			test, _ := TestByName(tc.test)
			gs, cc := pairC(t, vm, test, true, tc.args)
			require.Equal(t, 0, gs.code, "Go server: %s\nC client: %s", gs, cc)
			require.Equal(t, 0, cc.code, "C client: %s\nGo server: %s", cc, gs)
			cs, gc := pairC(t, vm, test, false, tc.args)
			require.Equal(t, 0, gc.code, "Go client: %s\nC server: %s", gc, cs)
			require.Equal(t, 0, cs.code, "C server: %s\nGo client: %s", cs, gc)
			group := `QPN 0xffffff PSN 0x[0-9a-f]+\n M?GID: 255:02:00:00:00:00:00:00:00:00:00:00:00:00:00:01$`
			for _, s := range []side{gs, cs} {
				require.Regexp(t, `(?m)^ local address: LID 0000 `+group, s.stdout, "the server advertises the group")
			}
			for _, s := range []side{gc, cc} {
				require.Regexp(t, `(?m)^ remote address: LID 0000 `+group, s.stdout, "the client sends to the group")
				if test.Kind == LAT {
					require.Regexp(t, `(?m)^ local address: LID 0000 `+group, s.stdout, "the latency client listens on the group too")
				}
				require.Regexp(t, `Send (BW|Latency) Multicast Test\n( Test with events.*\n)? MultiCast runs on UD!\n`, s.stdout)
			}
			assert.Equal(t, shape(cs.stdout), shape(gs.stdout), "server stdout layout (C then Go)\nC:\n%s\nGo:\n%s", cs.stdout, gs.stdout)
			assert.Equal(t, shape(cc.stdout), shape(gc.stdout), "client stdout layout (C then Go)\nC:\n%s\nGo:\n%s", cc.stdout, gc.stdout)
			checkNumbers(t, test, tc, resultRows(gc.stdout))
			// The receivers counted every message: the row's iterations
			// column is what arrived through the group.
			n := tc.args[slices.Index(tc.args, "-n")+1]
			for _, s := range []side{gs, cs} {
				rows := resultRows(s.stdout)
				require.Len(t, rows, 1, "server rows:\n%s", s.stdout)
				require.Equal(t, n, rows[0][1], "messages received through the group")
			}
			t.Logf("Go client:\n%sC client:\n%sGo server:\n%sC server:\n%s", lastRows(gc.stdout), lastRows(cc.stdout), lastRows(gs.stdout), lastRows(cs.stdout))
		})
	}
	// With the IPv4-mapped GID the receiver's MGID and the sender's GID
	// are of different kinds: perftest stops both sides, and so does ibgo.
	t.Run("ipv4_gid_refused", func(t *testing.T) {
		test, _ := TestByName("send_bw")
		gs, cc := pair(t, vm, test, true, []string{"-g", "-n", "100", "-s", "1024"})
		assert.Equal(t, 1, gs.code, "Go server: %s", gs)
		assert.Equal(t, 1, cc.code, "C client: %s", cc)
		assert.Contains(t, gs.stderr, "Found Incompatibility issue with GID types")
		assert.Contains(t, cc.stderr, "Found Incompatibility issue with GID types")
	})
}

// TestCommCMInterop runs -z (the exchange over an rdma_cm RC connection
// instead of TCP) against perftest -z, both roles: perftest -z speaks only
// rdma_cm on the port (binary 56-byte keys), so both sides exiting 0 with
// the numbers the other printed is the exchange working; the layouts
// (address lines without RKey/VAddr, "Data ex. method : rdma_cm") match.
func TestCommCMInterop(t *testing.T) {
	vm := testutil.OneNode(t)
	cmInterop(t, vm, []interopCase{
		{"write_bw", "write_bw", []string{"-z", "-n", "300"}, 1},
		{"read_bw", "read_bw", []string{"-z", "-n", "300"}, 1},
		{"send_bw", "send_bw", []string{"-z", "-n", "300"}, 1},
		{"send_bw_ud", "send_bw", []string{"-z", "-c", "UD", "-n", "300", "-s", "1024"}, 1},
		{"write_lat", "write_lat", []string{"--comm_rdma_cm", "-n", "300"}, 1},
		{"send_lat", "send_lat", []string{"-z", "-n", "300"}, 1},
	})
}

// TestWorkCMInterop runs -R (the test QPs connected by rdma_cm, the
// exchange over rdma_cm too) against perftest -R, both roles, RC:
// "rdma_cm QPs : ON", both exit 0, the data moved (numbers, and the RDMA
// servers print the client's report).
func TestWorkCMInterop(t *testing.T) {
	vm := testutil.OneNode(t)
	cmInterop(t, vm, []interopCase{
		{"write_bw", "write_bw", []string{"-R", "-n", "300"}, 1},
		{"write_bw_q2", "write_bw", []string{"-R", "-n", "300", "-q", "2", "-s", "4096"}, 1},
		{"read_bw", "read_bw", []string{"-R", "-n", "300"}, 1},
		{"send_bw", "send_bw", []string{"-R", "-n", "300"}, 1},
		{"write_lat", "write_lat", []string{"--rdma_cm", "-n", "300"}, 1},
		{"send_lat", "send_lat", []string{"-R", "-n", "300"}, 1},
	})
}

// TestWorkCMUDInterop runs send_bw and send_lat -c UD -R against perftest
// 4.5, both roles: the client's SIDR request on the UDP port space, the
// server's QPN and Q_Key (0x01234567) from the SIDR reply; the sends only
// land (and the server counts them) when the QPN, Q_Key and AH are right;
// in the latency and bidirectional tests the server learns the client's
// QPN and address from its SEND_WITH_IMM. With -T the
// client's ids carry the TOS and the banner says so; --retry_count goes
// into the connection parameters.
func TestWorkCMUDInterop(t *testing.T) {
	vm := testutil.OneNode(t)
	cmInterop(t, vm, []interopCase{
		{"send_bw_ud", "send_bw", []string{"-R", "-c", "UD", "-n", "300", "-s", "1024"}, 1},
		{"send_bw_ud_q2", "send_bw", []string{"-R", "-c", "UD", "-n", "300", "-s", "512", "-q", "2"}, 1},
		{"send_bw_ud_tos", "send_bw", []string{"-R", "-c", "UD", "-n", "300", "-s", "1024", "-T", "32", "--retry_count", "5"}, 1},
		{"send_bw_rc_tos", "send_bw", []string{"-R", "-n", "300", "-T", "32", "--retry_count=6"}, 1},
		// The server sends too: the client's SEND_WITH_IMM gives it the
		// client's QPN and address.
		{"send_lat_ud", "send_lat", []string{"-R", "-c", "UD", "-n", "300", "-s", "512"}, 1},
		{"send_bw_ud_bidir", "send_bw", []string{"-R", "-c", "UD", "-n", "300", "-s", "1024", "-b"}, 1},
	})
}

func cmInterop(t *testing.T, vm testutil.VMInfo, cases []interopCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			test, ok := TestByName(tc.test)
			require.True(t, ok)
			gs, cc := pairCWith(t, vm, test, true, tc.args, goSideStuck)
			require.Equal(t, 0, gs.code, "Go server: %s\nC client: %s", gs, cc)
			require.Equal(t, 0, cc.code, "C client: %s\nGo server: %s", cc, gs)
			cs, gc := pairCWith(t, vm, test, false, tc.args, goSideStuck)
			require.Equal(t, 0, gc.code, "Go client: %s\nC server: %s", gc, cs)
			require.Equal(t, 0, cs.code, "C server: %s\nGo client: %s", cs, gc)
			for _, s := range []side{gs, gc, cs, cc} {
				require.Contains(t, s.stdout, " Data ex. method : rdma_cm")
				if hasFlag(tc.args, "-R") || hasFlag(tc.args, "--rdma_cm") {
					require.Contains(t, s.stdout, " rdma_cm QPs\t : ON\n")
				}
			}
			assert.Equal(t, shape(cs.stdout), shape(gs.stdout), "server stdout layout (C then Go)\nC:\n%s\nGo:\n%s", cs.stdout, gs.stdout)
			assert.Equal(t, shape(cc.stdout), shape(gc.stdout), "client stdout layout (C then Go)\nC:\n%s\nGo:\n%s", cc.stdout, gc.stdout)
			require.Len(t, resultRows(gc.stdout), tc.rows, "Go client result rows:\n%s", gc.stdout)
			checkNumbers(t, test, tc, resultRows(gc.stdout))
			if test.Kind == BW && test.Verb != Send {
				// The report exchange over rdma_cm: the server prints the
				// client's numbers.
				assert.Equal(t, resultRows(gc.stdout)[0], resultRows(cs.stdout)[0], "C server must print the Go client's numbers")
				assert.Equal(t, resultRows(cc.stdout)[0], resultRows(gs.stdout)[0], "Go server must print the C client's numbers")
			}
			t.Logf("Go client:\n%sC client:\n%s", lastRows(gc.stdout), lastRows(cc.stdout))
		})
	}
}

// goSideStuck is goSide with a 60 s bound: a Go side still running then
// reports where its goroutines are (and fails), so a hang shows its place.
func goSideStuck(t Test, args []string) side {
	var o, e bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stack []byte
	dumped := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(dumped)
		buf := make([]byte, 1<<20)
		stack = buf[:runtime.Stack(buf, true)]
	})
	code := Main(ctx, t, "ib_"+t.Name(), args, &o, &e)
	if !stop() {
		<-dumped
		fmt.Fprintf(&e, "--- stuck after 60 s:\n%s", stack)
	}
	return side{code, o.String(), e.String()}
}
