//go:build linux

package chaos_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/testutil"
)

// twoScenario is a fault between two guests: node 1 publishes, node 2
// subscribes, each through its own driver.
type twoScenario struct {
	name       string
	n, rate    int
	expectLoss bool
	netem      []string      // on both guests' netdevs for the stream
	down       time.Duration // node 1's netdev down for this long mid-stream
	silent     time.Duration // node 2 drops every packet (netem loss 100 %) this long mid-stream
}

func twoScenarios() []twoScenario {
	return []twoScenario{
		{name: "link down 1 s", n: 25_000, rate: 5_000, down: time.Second},
		// 10 s is Aeron's image liveness timeout: the subscriber's driver
		// may let the image go, and then what was sent into the outage is
		// lost, as with the C driver; that must be visible
		{name: "link down 10 s", n: 70_000, rate: 5_000, down: 10 * time.Second, expectLoss: true},
		// node 2 vanishes with its port up: node 1's RC QP runs out of
		// retries and goes to the error state under the driver
		{name: "peer silent 5 s (node 2: netem loss 100 %)", n: 40_000, rate: 5_000, silent: 5 * time.Second},
		{name: "netem loss 1 %", n: 10_000, rate: 5_000, netem: []string{"loss", "1%"}},
		{name: "netem loss 5 %", n: 10_000, rate: 5_000, netem: []string{"loss", "5%"}},
		{name: "netem loss 10 %", n: 10_000, rate: 5_000, netem: []string{"loss", "10%"}},
		{name: "netem reordering (2 ms delay, 25 % sent at once)", n: 10_000, rate: 5_000, netem: []string{"delay", "2ms", "reorder", "25%", "50%"}},
		{name: "netem duplication 5 %", n: 10_000, rate: 5_000, netem: []string{"duplicate", "5%"}},
		{name: "netem delay 20 ms ± 5 ms", n: 10_000, rate: 5_000, netem: []string{"delay", "20ms", "5ms"}},
	}
}

const ctlPort = 26999

// TestChaosTwoGuests (issue 33): link outages and netem between two
// guests, on every medium, with a row each (docs/reliability.md). Node 1
// prints the table.
func TestChaosTwoGuests(t *testing.T) {
	vm := testutil.TwoNodes(t)
	subIP := vm.Peer
	var ln net.Listener
	var err error
	if vm.Node == 2 {
		subIP = vm.IP
		ln, err = net.Listen("tcp", net.JoinHostPort(vm.IP, strconv.Itoa(ctlPort)))
		require.NoError(t, err)
		t.Cleanup(func() { ln.Close() })
	}
	var tb table
	if vm.Node == 1 {
		defer tb.print("two guests, kernel " + kernelRelease())
	}
	i := 0
	for si, sc := range twoScenarios() {
		for _, m := range allMedia {
			i++
			port := 27000 + 2*i
			streamID := int32(chaosStreamBase + 100 + i)
			ch := fmt.Sprintf(m.channel, subIP, port)
			t.Run(fmt.Sprintf("%02d_%s/%s", si, strings.ReplaceAll(sc.name, " ", "_"), m.name), func(t *testing.T) {
				// a driver of the row's own on each node: its error log and
				// counters are the row's
				dir := fmt.Sprintf("/dev/shm/chaos2-node%d-%d", vm.Node, i)
				d, err := startDriver(t, dir, "")
				require.NoError(t, err)
				t.Cleanup(func() { d.stop(); os.RemoveAll(dir) })
				if sc.netem != nil {
					netem(t, vm.Netdev, sc.netem...)
				}
				if vm.Node == 2 {
					subscribeSide(t, vm, ln, dir, ch, streamID, sc)
					return
				}
				s := startStream(ch, streamID, dir, "", sc.n, sc.rate)
				fault := sc.silent
				if sc.down > 0 {
					waitOffered(t, s, int64(sc.n/5))
					t.Cleanup(func() { _ = exec.Command("ip", "link", "set", vm.Netdev, "up").Run() })
					start := time.Now()
					link(t, vm.Netdev, "down")
					time.Sleep(sc.down)
					link(t, vm.Netdev, "up")
					fault = time.Since(start)
				}
				<-s.pubDone
				r := askNode2(t, vm.Peer, s)
				r.scenario, r.medium, r.fault, r.expectLoss = sc.name, m.name, fault, sc.expectLoss
				r.counters = "node 1: " + fmtCounters(countersOf(dir)) + "; node 2: " + r.counters
				if e := errSummary(dir); e != "-" {
					r.errs = "node 1: " + e + "; node 2: " + r.errs
				}
				if pe := s.ev.String(); pe != "-" {
					r.seen = "publisher: " + pe + "; " + r.seen
				}
				tb.add(t, r)
				if strings.HasPrefix(r.verdict, "FAIL") {
					diagnose(t, d)
				}
			})
		}
	}
}

func netem(t *testing.T, dev string, spec ...string) {
	args := append([]string{"qdisc", "replace", "dev", dev, "root", "netem"}, spec...)
	out, err := exec.Command("tc", args...).CombinedOutput()
	require.NoError(t, err, "tc %s: %s", strings.Join(args, " "), out)
	t.Cleanup(func() { _ = exec.Command("tc", "qdisc", "del", "dev", dev, "root").Run() })
}

func waitOffered(t *testing.T, s *stream, k int64) {
	end := time.Now().Add(time.Minute)
	for s.offered.Load() < k {
		if time.Now().After(end) {
			t.Fatalf("the publication did not get going: %s", s.ev.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// subscribeSide is node 2's half of a scenario: subscribe, take node 1's
// "offered K" line, wait for K messages (or settle), and answer with the
// tally, the error log and the counters.
func subscribeSide(t *testing.T, vm testutil.VMInfo, ln net.Listener, dir, ch string, streamID int32, sc twoScenario) {
	s := startStream(ch, streamID, "", dir, 0, 0)
	if sc.silent > 0 {
		waitRunning(t, s, sc.n/5)
		netem(t, vm.Netdev, "loss", "100%")
		time.Sleep(sc.silent)
		out, err := exec.Command("tc", "qdisc", "del", "dev", vm.Netdev, "root").CombinedOutput()
		require.NoError(t, err, "tc qdisc del: %s", out)
	}
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(2 * streamLimit))
	conn, err := ln.Accept()
	require.NoError(t, err, "node 1 never asked")
	defer conn.Close()
	rd := bufio.NewReader(conn)
	line, err := rd.ReadString('\n')
	require.NoError(t, err)
	var offered int64
	_, err = fmt.Sscanf(line, "offered %d", &offered)
	require.NoError(t, err, "node 1 said %q", line)
	s.offered.Store(offered)
	s.wait()
	distinct, delivered, dups, ooo, _, stall := s.tally.snapshot()
	clean := func(x string) string { return strings.NewReplacer("\t", " ", "\n", " ").Replace(x) }
	fmt.Fprintf(conn, "%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", distinct, delivered, dups, ooo, stall.Nanoseconds(),
		clean(s.ev.String()), clean(errSummary(dir)), clean(fmtCounters(countersOf(dir))))
}

// askNode2 tells node 2 what was offered and reads its tally.
func askNode2(t *testing.T, peer string, s *stream) *row {
	var conn net.Conn
	var err error
	end := time.Now().Add(time.Minute)
	for {
		conn, err = net.DialTimeout("tcp", net.JoinHostPort(peer, strconv.Itoa(ctlPort)), 5*time.Second)
		if err == nil || time.Now().After(end) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.NoError(t, err, "asking node 2")
	defer conn.Close()
	offered := s.offered.Load()
	fmt.Fprintf(conn, "offered %d\n", offered)
	conn.SetReadDeadline(time.Now().Add(streamLimit + time.Minute))
	line, err := bufio.NewReader(conn).ReadString('\n')
	require.NoError(t, err, "node 2's tally")
	f := strings.Split(strings.TrimRight(line, "\n"), "\t")
	require.Len(t, f, 8, "node 2 said %q", line)
	num := func(i int) int { v, _ := strconv.Atoi(f[i]); return v }
	stall, _ := strconv.ParseInt(f[4], 10, 64)
	return &row{offered: int(offered), distinct: num(0), delivered: num(1), dups: num(2), ooo: num(3),
		stall: time.Duration(stall), seen: f[5], errs: f[6], counters: f[7]}
}

// diagnose logs the device's view after a failed row: its QPs and the
// rxe counters.
func diagnose(t *testing.T, d *proc) {
	out, _ := exec.Command("sh", "-c", "ibgo aeron stat --dir "+d.dir+" | grep -v ' 0 - '; rdma res show qp; rdma res show cm_id; for f in /sys/class/infiniband/*/ports/1/hw_counters/*; do v=$(cat $f); [ \"$v\" = 0 ] || echo $(basename $f) $v; done").CombinedOutput()
	t.Logf("the driver and the device after the failure:\n%s\ndriver output:\n%s", out, d.out.String())
}
