//go:build linux

package perftest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/testutil"
	_ "github.com/ibgo/ibgo/rxe"
	"github.com/ibgo/ibgo/uverbs"
)

func TestMain(m *testing.M) {
	// An rdma_cm control listener (-z) is no TCP socket: the Go server
	// says when it is up.
	cmListening = func(port int) { cmListeners.Store(port, true) }
	testutil.Main(m)
}

var cmListeners sync.Map

// run is one side's outcome.
type side struct {
	code           int
	stdout, stderr string
}

func (s side) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", s.code, s.stdout, s.stderr)
}

// goSide runs ibgo's test in this process.
func goSide(t Test, args []string) side {
	var o, e bytes.Buffer
	code := Main(context.Background(), t, "ib_"+t.Name(), args, &o, &e)
	return side{code, o.String(), e.String()}
}

// cSide runs Debian's perftest program.
func cSide(ctx context.Context, tb testing.TB, t Test, args []string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	tb.Helper()
	path, err := exec.LookPath("ib_" + t.Name())
	if err != nil {
		if testutil.Required() {
			tb.Fatalf("REQUIRE_VM=1 but perftest's ib_%s is not installed", t.Name())
		}
		tb.Skipf("perftest's ib_%s not installed", t.Name())
	}
	var o, e bytes.Buffer
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	require.NoError(tb, cmd.Start())
	return cmd, &o, &e
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

// listening reports whether some socket listens on TCP port (the C client
// gives up at once, so the Go server must be up first; a probe connection
// would be the one client perftest accepts).
func listening(port int) bool {
	if _, ok := cmListeners.Load(port); ok {
		return true
	}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		want := fmt.Sprintf(":%04X ", port)
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) > 3 && strings.HasSuffix(fs[1]+" ", want) && fs[3] == "0A" {
				return true
			}
		}
	}
	return false
}

var nextPort = 19000

// pair runs server and client of test t with args (plus device, GID and
// port): the Go side in this process, the C side as perftest.
func pair(tb testing.TB, vm testutil.VMInfo, t Test, goServer bool, args []string) (srv, cli side) {
	tb.Helper()
	return pairWith(tb, vm, t, goServer, args, goSide)
}

// pairWith is pair with the Go side run by goRun.
func pairWith(tb testing.TB, vm testutil.VMInfo, t Test, goServer bool, args []string, goRun func(Test, []string) side) (srv, cli side) {
	tb.Helper()
	nextPort++
	port := nextPort
	common := append([]string{"-d", vm.Dev, "-x", strconv.Itoa(gid(tb, vm)), "-p", strconv.Itoa(port)}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if goServer {
		done := make(chan side, 1)
		go func() { done <- goRun(t, common) }()
		for !listening(port) {
			select {
			case s := <-done:
				tb.Fatalf("Go server ended before listening: %s", s)
			case <-time.After(10 * time.Millisecond):
			}
		}
		cmd, o, e := cSide(ctx, tb, t, append(common, vm.IP))
		err := cmd.Wait()
		cli = side{exitCode(err), o.String(), e.String()}
		select {
		case srv = <-done:
		case <-ctx.Done():
			// Say where the Go server is: one 6.12 run hung here after the
			// C client had printed its report (-R write_bw), cause not found.
			buf := make([]byte, 1<<20)
			tb.Fatalf("Go server did not finish; C client: %s\ngoroutines:\n%s", cli, buf[:runtime.Stack(buf, true)])
		}
		return srv, cli
	}
	cmd, o, e := cSide(ctx, tb, t, common)
	cli = goRun(t, append(common, vm.IP))
	err := cmd.Wait()
	srv = side{exitCode(err), o.String(), e.String()}
	return srv, cli
}

var gidCache = map[string]int{}

func gid(tb testing.TB, vm testutil.VMInfo) int {
	if g, ok := gidCache[vm.Dev]; ok {
		return g
	}
	c, err := uverbs.Open(vm.Dev)
	require.NoError(tb, err)
	defer c.Close()
	g, err := uverbs.ParseGID(vm.IP)
	require.NoError(tb, err)
	i, err := c.GIDIndexForIP(1, g)
	require.NoError(tb, err)
	gidCache[vm.Dev] = int(i)
	return int(i)
}

var (
	reHex    = regexp.MustCompile(`0x[0-9a-f]+`)
	reFloat  = regexp.MustCompile(`-?\d+\.\d+|-?\binf\b|-?\bnan\b`)
	reInt    = regexp.MustCompile(`\b\d+\b`)
	reSpaces = regexp.MustCompile(` +`)
	reSample = regexp.MustCompile(`^\d+, [0-9.e+-]+$`)
	reTabPad = regexp.MustCompile(` +\t`)
)

// shape masks what differs from run to run (numbers, keys, addresses) and
// the padding that follows number widths, leaving perftest's layout: labels,
// line order, separators, tabs. (The exact bytes, padding included, are
// checked offline against captured perftest output: TestGoldenOutput.)
func shape(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if reSample.MatchString(l) {
			// -U and -H lines are printed with %g: 16 or 15.685 alike.
			out = append(out, "N, F")
			continue
		}
		l = reHex.ReplaceAllString(l, "X")
		l = reFloat.ReplaceAllString(l, "F")
		l = reInt.ReplaceAllString(l, "N")
		l = reTabPad.ReplaceAllString(l, "\t")
		out = append(out, strings.TrimRight(reSpaces.ReplaceAllString(l, " "), " "))
	}
	return out
}

// resultRows returns the numeric rows under the table header.
func resultRows(s string) [][]string {
	var rows [][]string
	in := false
	for _, l := range strings.Split(s, "\n") {
		switch {
		case strings.HasPrefix(l, " #bytes"):
			in = true
		case strings.HasPrefix(l, "-----"):
			in = false
		case in && strings.TrimSpace(l) != "":
			rows = append(rows, strings.Fields(l))
		}
	}
	return rows
}

type interopCase struct {
	name string
	test string
	args []string
	// result rows expected under the table header (-1: the output is not
	// that table, only its layout against perftest's is compared)
	rows int
}

var interopCases = []interopCase{
	{"write_bw", "write_bw", []string{"-n", "300"}, 1},
	{"write_bw_s4k_q2", "write_bw", []string{"-n", "300", "-s", "4096", "-q", "2"}, 1},
	{"write_bw_all", "write_bw", []string{"-a", "-n", "20"}, 23},
	{"write_bw_bidir", "write_bw", []string{"-b", "-n", "200"}, 1},
	{"write_bw_duration", "write_bw", []string{"-D", "2"}, 1},
	{"read_bw", "read_bw", []string{"-n", "300", "-o", "4"}, 1},
	{"send_bw", "send_bw", []string{"-n", "300"}, 1},
	{"send_bw_bidir", "send_bw", []string{"-b", "-n", "200", "-s", "8192"}, 1},
	{"send_bw_ud", "send_bw", []string{"-c", "UD", "-n", "300", "-s", "1024"}, 1},
	{"send_bw_uc", "send_bw", []string{"-c", "UC", "-n", "300", "-s", "4096"}, 1},
	{"atomic_bw_fa", "atomic_bw", []string{"-n", "300"}, 1},
	{"atomic_bw_cs", "atomic_bw", []string{"-n", "300", "-A", "CMP_AND_SWAP"}, 1},
	{"write_lat", "write_lat", []string{"-n", "300"}, 1},
	{"write_lat_inline", "write_lat", []string{"-n", "300", "-s", "64", "-I", "64"}, 1},
	{"write_lat_duration", "write_lat", []string{"-D", "2"}, 1},
	{"read_lat", "read_lat", []string{"-n", "300", "-s", "4096"}, 1},
	{"send_lat", "send_lat", []string{"-n", "300"}, 1},
	{"send_lat_ud", "send_lat", []string{"-c", "UD", "-n", "300", "-s", "512"}, 1},
	{"send_lat_cqmod", "send_lat", []string{"-n", "300", "-Q", "7"}, 1},
	{"atomic_lat", "atomic_lat", []string{"-n", "300"}, 1},
	{"send_lat_all", "send_lat", []string{"-a", "-n", "20"}, 23},
	{"write_bw_nopeak", "write_bw", []string{"-n", "300", "-N"}, 1},
	{"write_bw_postlist", "write_bw", []string{"-n", "320", "-l", "4"}, 1},
	{"write_bw_cqmod", "write_bw", []string{"-n", "300", "-Q", "10"}, 1},
	// (Not with -Q: perftest's warm-up then waits for a completion per work
	// request, most of them unsignalled, and hangs; ibgo's signals each.)
	{"write_bw_warmup", "write_bw", []string{"-n", "300", "--perform_warm_up"}, 1},
	{"send_bw_srq_q2", "send_bw", []string{"-n", "300", "-q", "2", "--use-srq"}, 1},
	{"write_bw_cpu_util", "write_bw", []string{"-D", "2", "--cpu_util"}, 1},
	{"send_bw_msgrate", "send_bw", []string{"-n", "300", "--output=message_rate"}, -1},
	{"write_lat_output_latency", "write_lat", []string{"-n", "300", "--output=latency"}, -1},
	{"write_lat_unsorted", "write_lat", []string{"-n", "100", "-U"}, -1},
	{"send_lat_histogram", "send_lat", []string{"-n", "100", "-H"}, -1},
}

// pairC is pair, run again (up to three times in all) when the C side gave
// up because its own CPU-clock calibration failed: perftest samples
// gettimeofday against the cycle counter and refuses to report when the fit
// is poor (r^2 < 0.9), which happens under TCG when the guest is busy. That
// is the reference tool failing to measure, not a result to compare.
func pairC(tb testing.TB, vm testutil.VMInfo, t Test, goServer bool, args []string) (srv, cli side) {
	tb.Helper()
	return pairCWith(tb, vm, t, goServer, args, goSide)
}

// cJunkStatus reports whether the C side stopped on a "completion with
// error" whose status is no ibv_wc_status at all (they end at 23,
// IBV_WC_TM_RNDV_INCOMPLETE): perftest
// 4.5's event mode (-e) on 6.12 sometimes reads a work completion it did not
// fill (seen once in send_lat -e: "Failed status 730817280: wr_id 0
// syndrom 0x30303a31"). That is the reference tool misreading its own CQ,
// not what the Go peer sent; a real error status fails the test as before.
// perftest prints the status with %d, so junk can be negative too ("Failed
// status -1410314240", a clean-clone CI run on 6.12).
func cJunkStatus(stderr string) bool {
	m := junkStatusRE.FindStringSubmatch(stderr)
	if m == nil {
		return false
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	return err == nil && (n < 0 || n > 23)
}

var junkStatusRE = regexp.MustCompile(`Failed status (-?\d+):`)

// pairCWith is pairC with the Go side run by goRun.
func pairCWith(tb testing.TB, vm testutil.VMInfo, t Test, goServer bool, args []string, goRun func(Test, []string) side) (srv, cli side) {
	tb.Helper()
	for try := 1; ; try++ {
		srv, cli = pairWith(tb, vm, t, goServer, args, goRun)
		c := cli
		if !goServer {
			c = srv
		}
		calib := strings.Contains(c.stderr, "Can't produce a report") && strings.Contains(c.stderr, "Correlation coefficient")
		if try == 3 || !calib && !cJunkStatus(c.stderr) {
			return srv, cli
		}
		tb.Logf("try %d: C perftest could not calibrate its clock or read a completion it did not fill (%s); running the pair again", try, strings.TrimSpace(c.stderr))
	}
}

// TestInteropWithPerftest runs every test both ways against Debian's
// perftest: Go server with C client and C server with Go client. Both must
// exit 0; each Go side's stdout must have the C side's layout for the same
// role (same lines, labels and separators, numbers masked); where the
// server prints the client's numbers (RDMA bw tests) they must be the ones
// the client printed, which checks the report exchange byte for byte.
func TestInteropWithPerftest(t *testing.T) {
	vm := testutil.OneNode(t)
	for _, tc := range interopCases {
		t.Run(tc.name, func(t *testing.T) {
			test, ok := TestByName(tc.test)
			require.True(t, ok)
			gs, cc := pairC(t, vm, test, true, tc.args)
			require.Equal(t, 0, gs.code, "Go server: %s\nC client: %s", gs, cc)
			require.Equal(t, 0, cc.code, "C client: %s\nGo server: %s", cc, gs)
			cs, gc := pairC(t, vm, test, false, tc.args)
			require.Equal(t, 0, gc.code, "Go client: %s\nC server: %s", gc, cs)
			require.Equal(t, 0, cs.code, "C server: %s\nGo client: %s", cs, gc)

			assert.Equal(t, shape(cs.stdout), shape(gs.stdout), "server stdout layout (C then Go)\nC:\n%s\nGo:\n%s", cs.stdout, gs.stdout)
			assert.Equal(t, shape(cc.stdout), shape(gc.stdout), "client stdout layout (C then Go)\nC:\n%s\nGo:\n%s", cc.stdout, gc.stdout)
			assert.Equal(t, shape(cClock(cs.stderr)), shape(gs.stderr), "server stderr (C then Go)")
			assert.Equal(t, shape(cClock(cc.stderr)), shape(gc.stderr), "client stderr (C then Go)")

			if tc.rows < 0 {
				return
			}
			require.Len(t, resultRows(gc.stdout), tc.rows, "Go client result rows:\n%s", gc.stdout)
			require.Len(t, resultRows(cc.stdout), tc.rows, "C client result rows:\n%s", cc.stdout)
			require.Len(t, resultRows(gs.stdout), len(resultRows(cs.stdout)), "Go server rows as many as C server's:\nGo:\n%s\nC:\n%s", gs.stdout, cs.stdout)
			if test.Kind == BW && test.Verb != Send && !hasFlag(tc.args, "-b") {
				// The responder prints the requester's report as received.
				// (With --cpu_util the last column is the server's own CPU
				// use, which perftest's report exchange does not carry.)
				n := len(resultRows(gc.stdout)[tc.rows-1])
				if hasFlag(tc.args, "--cpu_util") {
					n--
				}
				assert.Equal(t, resultRows(gc.stdout)[tc.rows-1][:n], resultRows(cs.stdout)[0][:n], "C server must print the Go client's numbers")
				assert.Equal(t, resultRows(cc.stdout)[tc.rows-1][:n], resultRows(gs.stdout)[0][:n], "Go server must print the C client's numbers")
			}
			checkNumbers(t, test, tc, resultRows(gc.stdout))
			t.Logf("Go client:\n%s", lastRows(gc.stdout))
			t.Logf("C client:\n%s", lastRows(cc.stdout))
		})
	}
}

// cClock drops perftest's CPU-clock calibration warnings (ibgo reads the
// monotonic clock and has none); under TCG they come and go.
func cClock(s string) string {
	var keep []string
	for _, l := range strings.SplitAfter(s, "\n") {
		if !strings.HasPrefix(l, "Correlation coefficient") && !strings.HasPrefix(l, "Conflicting CPU frequency") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "")
}

func hasFlag(args []string, f string) bool {
	for _, a := range args {
		if a == f {
			return true
		}
	}
	return false
}

func lastRows(s string) string {
	var b strings.Builder
	for _, r := range resultRows(s) {
		b.WriteString(strings.Join(r, " ") + "\n")
	}
	return b.String()
}

// checkNumbers checks that the Go client's rows are plausible: the size
// and iteration columns as asked, positive rates.
func checkNumbers(t *testing.T, test Test, tc interopCase, rows [][]string) {
	iters := "0"
	for i, a := range tc.args {
		if a == "-n" {
			iters = tc.args[i+1]
		}
	}
	for i, r := range rows {
		if test.Kind == LAT && hasFlag(tc.args, "-D") {
			// #bytes #iterations t_avg[usec] tps average
			require.Len(t, r, 4, "row %v", r)
		} else {
			require.GreaterOrEqual(t, len(r), 5, "row %v", r)
		}
		if tc.rows > 1 {
			assert.Equal(t, strconv.Itoa(2<<i), r[0], "size column of row %d", i)
		}
		if hasFlag(tc.args, "-D") {
			n, err := strconv.Atoi(r[1])
			require.NoError(t, err)
			assert.Positive(t, n, "iterations counted in the duration window")
		} else if test.Kind == BW {
			q := 1
			for j, a := range tc.args {
				if a == "-q" {
					q, _ = strconv.Atoi(tc.args[j+1])
				}
			}
			n, _ := strconv.Atoi(iters)
			assert.Equal(t, strconv.Itoa(n*q), r[1], "iterations column")
		} else {
			assert.Equal(t, iters, r[1], "iterations column")
		}
		for _, f := range r[2:] {
			v, err := strconv.ParseFloat(f, 64)
			require.NoError(t, err, "column %q of %v", f, r)
			assert.GreaterOrEqual(t, v, 0.0)
		}
		last, _ := strconv.ParseFloat(r[len(r)-1], 64)
		if test.Kind == BW {
			assert.Positive(t, last, "message rate in %v", r)
		}
	}
}

// TestPeerKilled kills the C peer in the middle of a run: the Go side must
// stop within seconds with an error that says what happened, not spin
// forever (perftest's latency loops would).
func TestPeerKilled(t *testing.T) {
	vm := testutil.OneNode(t)
	for _, tc := range []struct {
		test     string
		goServer bool
		args     []string
		want     string
	}{
		// -n keeps each test running for minutes. (Not more: like perftest,
		// ibgo keeps 8 bytes per iteration for each timestamp array, and the
		// Go runtime zeroes a reused huge allocation, so 10^8 made this test
		// binary resident at 800 MB and the guest's next test ran out of
		// memory.)
		{"write_lat", false, []string{"-n", "5000000"}, "peer closed the out-of-band connection"},
		{"send_lat", true, []string{"-n", "5000000"}, "peer closed the out-of-band connection"},
		{"send_bw", true, []string{"-n", "5000000"}, "peer closed the out-of-band connection"},
		// rxe (6.1) never reports retry-exceeded here; C perftest hangs.
		{"write_bw", false, []string{"-n", "5000000"}, "peer closed the out-of-band connection"},
	} {
		name := tc.test + map[bool]string{true: "_go_server", false: "_go_client"}[tc.goServer]
		t.Run(name, func(t *testing.T) {
			test, _ := TestByName(tc.test)
			nextPort++
			port := nextPort
			common := append([]string{"-d", vm.Dev, "-x", strconv.Itoa(gid(t, vm)), "-p", strconv.Itoa(port)}, tc.args...)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			done := make(chan side, 1)
			var cmd *exec.Cmd
			var cout *bytes.Buffer
			sent0 := sentPkts(t, vm.Dev)
			if tc.goServer {
				go func() { done <- goSide(test, common) }()
				for !listening(port) {
					time.Sleep(10 * time.Millisecond)
				}
				cmd, cout, _ = cSide(ctx, t, test, append(common, vm.IP))
			} else {
				cmd, cout, _ = cSide(ctx, t, test, common)
				go func() { done <- goSide(test, append(common, vm.IP)) }()
			}
			// Kill the peer once the data phase is well under way: the
			// device has sent 2000 packets since the sides started (the
			// exchange before the data phase sends none).
			waitSent(t, vm.Dev, sent0+2000, done)
			select {
			case s := <-done:
				t.Fatalf("Go side ended before the peer was killed: %s\nC: %s", s, cout)
			default:
			}
			require.NoError(t, cmd.Process.Kill())
			_ = cmd.Wait()
			killed := time.Now()
			select {
			case s := <-done:
				assert.NotEqual(t, 0, s.code, "exit status after the peer died")
				assert.Contains(t, s.stderr, tc.want, "Go side's error:\n%s", s)
				t.Logf("Go side stopped %v after the kill: %q", time.Since(killed).Round(time.Millisecond), strings.TrimSpace(s.stderr))
				assert.Less(t, time.Since(killed), 20*time.Second)
			case <-ctx.Done():
				t.Fatal("the Go side did not notice the dead peer")
			}
		})
	}
}

// sentPkts reads rxe's count of packets the device sent.
func sentPkts(t *testing.T, dev string) uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/class/infiniband", dev, "ports/1/hw_counters/sent_pkts"))
	require.NoError(t, err)
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	require.NoError(t, err)
	return n
}

// waitSent waits until the device has sent at least n packets, failing the
// test when the Go side ends first or 30 s pass.
func waitSent(t *testing.T, dev string, n uint64, done chan side) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for sentPkts(t, dev) < n {
		select {
		case s := <-done:
			t.Fatalf("Go side ended before the data phase was under way: %s", s)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the device sent fewer than %d packets in 30 s", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestIbgoPairs runs ibgo against itself (both sides in this process): the
// protocol must close cleanly without perftest on either end, and the
// lingering close of write_lat -D (each side half-closes, then waits for the
// other) must end as soon as both are done, not at lingerMax.
func TestIbgoPairs(t *testing.T) {
	vm := testutil.OneNode(t)
	for _, tc := range []struct {
		test string
		args []string
	}{
		{"write_lat", []string{"-D", "2"}},
		{"write_lat", []string{"-n", "300"}},
		{"write_bw", []string{"-n", "300"}},
		{"send_lat", []string{"-D", "2"}},
		{"send_bw", []string{"-c", "UD", "-n", "300", "-s", "1024"}},
		// issue 9 #3: an SRQ shared by several QPs (hung: one QP's share
		// of receives was posted, all with wr_id 0)
		{"send_bw", []string{"-n", "300", "-q", "2", "--use-srq"}},
		{"send_bw", []string{"-n", "300", "-q", "3", "-r", "64", "--use-srq"}},
		// issue 9 #4: warm-up with a post list (spun forever)
		{"write_bw", []string{"-n", "320", "-l", "4", "--perform_warm_up"}},
	} {
		t.Run(tc.test+strings.Join(tc.args, ""), func(t *testing.T) {
			test, ok := TestByName(tc.test)
			require.True(t, ok)
			start := time.Now()
			srv, cli := ibgoPair(t, vm, test, tc.args)
			took := time.Since(start)
			require.Equal(t, 0, srv.code, "server: %s\nclient: %s", srv, cli)
			require.Equal(t, 0, cli.code, "client: %s\nserver: %s", cli, srv)
			require.Len(t, resultRows(cli.stdout), 1, "client rows:\n%s", cli.stdout)
			require.Less(t, took, lingerMax, "a lingering close waited for its bound")
			t.Logf("both sides done in %v", took.Round(time.Millisecond))
		})
	}
}

// ibgoPair runs server and client of test in this process.
func ibgoPair(t *testing.T, vm testutil.VMInfo, test Test, args []string) (srv, cli side) {
	t.Helper()
	return ibgoPairArgs(t, vm, test, args, args)
}

// ibgoPairArgs is ibgoPair with different extra arguments for each side.
func ibgoPairArgs(t *testing.T, vm testutil.VMInfo, test Test, srvArgs, cliArgs []string) (srv, cli side) {
	t.Helper()
	nextPort++
	common := []string{"-d", vm.Dev, "-x", strconv.Itoa(gid(t, vm)), "-p", strconv.Itoa(nextPort)}
	done := make(chan side, 1)
	go func() { done <- goSide(test, append(slices.Clone(common), srvArgs...)) }()
	for !listening(nextPort) {
		time.Sleep(10 * time.Millisecond)
	}
	cli = goSide(test, append(append(slices.Clone(common), cliArgs...), vm.IP))
	select {
	case srv = <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("server did not finish; client: %s", cli)
	}
	return srv, cli
}

// TestJSONOutput: --json prints one valid JSON record per size and nothing
// else on stdout; --out_json_file writes them all as one JSON array.
func TestJSONOutput(t *testing.T) {
	vm := testutil.OneNode(t)
	bw, _ := TestByName("write_bw")
	srv, cli := ibgoPair(t, vm, bw, []string{"-a", "-n", "20", "--json"})
	require.Equal(t, 0, srv.code, "server: %s", srv)
	require.Equal(t, 0, cli.code, "client: %s", cli)
	lines := strings.Split(strings.TrimSpace(cli.stdout), "\n")
	require.Len(t, lines, 23, "one record per size 2 B .. 8 MiB:\n%s", cli.stdout)
	for i, l := range lines {
		var r Record
		require.NoError(t, json.Unmarshal([]byte(l), &r), "line %d: %s", i+1, l)
		require.Equal(t, 2<<i, r.Size)
		require.Equal(t, "write_bw", r.Test)
		require.Equal(t, "client", r.Role)
		require.Equal(t, "RC", r.Connection)
		require.NotNil(t, r.BWAverage)
		require.Greater(t, *r.BWAverage, 0.0, "line %d", i+1)
		require.GreaterOrEqual(t, *r.BWPeak, *r.BWAverage*0.99, "line %d", i+1)
		require.Equal(t, "MB/sec", r.BWUnit)
		require.NotEmpty(t, r.MsgUnit)
		require.EqualValues(t, 20, r.Iterations)
		require.NotEmpty(t, r.Params)
	}

	lat, _ := TestByName("send_lat")
	dir := t.TempDir()
	srvFile, file := filepath.Join(dir, "lat-server.json"), filepath.Join(dir, "lat.json")
	srv, cli = ibgoPairArgs(t, vm, lat, []string{"-n", "200", "--out_json_file", srvFile}, []string{"-n", "200", "--out_json_file", file})
	require.Equal(t, 0, srv.code, "server: %s", srv)
	require.Equal(t, 0, cli.code, "client: %s", cli)
	require.Len(t, resultRows(cli.stdout), 1, "the table still prints:\n%s", cli.stdout)
	readRecords := func(name string) []Record {
		b, err := os.ReadFile(name)
		require.NoError(t, err)
		var recs []Record
		require.NoError(t, json.Unmarshal(b, &recs), "%s: %s", name, b)
		require.Len(t, recs, 1, name)
		return recs
	}
	require.Equal(t, "server", readRecords(srvFile)[0].Role)
	r := readRecords(file)[0]
	require.Equal(t, "client", r.Role)
	require.Equal(t, "usec", r.LatUnit)
	for _, k := range []string{"t_min", "t_max", "t_typical", "t_avg", "t_stdev", "p99", "p99_9"} {
		_, ok := r.Lat[k]
		require.True(t, ok, "latency field %s missing: %v", k, r.Lat)
	}
	require.LessOrEqual(t, r.Lat["t_min"], r.Lat["t_typical"])
	require.LessOrEqual(t, r.Lat["t_typical"], r.Lat["t_max"])
	require.Greater(t, r.Lat["t_min"], 0.0)
}
