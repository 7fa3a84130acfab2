//go:build linux

package chaos_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/testutil"
	_ "github.com/ibgo/ibgo/mlx5"
	_ "github.com/ibgo/ibgo/rxe"
)

// medium is a channel template: the endpoint's address and port go in.
type medium struct{ name, channel string }

var allMedia = []medium{
	{"udp", "aeron:udp?endpoint=%s:%d"},
	{"ib-ud", "aeron:ib?endpoint=%s:%d|mtu=1024"},
	{"ib-rc", "aeron:ib?endpoint=%s:%d|ib-qp=rc|mtu=4096"},
}

func ibOnly(m medium) bool { return strings.HasPrefix(m.name, "ib") }
func every(medium) bool    { return true }

// rig is one scenario's two drivers in one guest.
type rig struct {
	t              *testing.T
	vm             testutil.VMInfo
	pub, sub       *proc
	pubDir, subDir string
	notes          []string
}

// oneScenario is a fault injected into a running stream in one guest.
type oneScenario struct {
	name       string
	media      func(medium) bool
	n, rate    int  // messages, and a second (0: unpaced)
	expectLoss bool // a driver goes: loss is correct and must be visible
	// fault runs while the stream runs and returns how long the fault
	// lasted (the stall beyond it is the time to recover)
	fault func(r *rig, s *stream) time.Duration
}

func link(t *testing.T, dev, state string) {
	out, err := exec.Command("ip", "link", "set", dev, state).CombinedOutput()
	require.NoError(t, err, "ip link set %s %s: %s", dev, state, out)
}

func linkDown(d time.Duration) func(r *rig, s *stream) time.Duration {
	return func(r *rig, s *stream) time.Duration {
		r.t.Cleanup(func() { _ = exec.Command("ip", "link", "set", r.vm.Netdev, "up").Run() })
		start := time.Now()
		link(r.t, r.vm.Netdev, "down")
		time.Sleep(d)
		link(r.t, r.vm.Netdev, "up")
		return time.Since(start)
	}
}

func rdmaLink(t *testing.T, args ...string) {
	out, err := exec.Command("timeout", append([]string{"30", "rdma", "link"}, args...)...).CombinedOutput()
	require.NoError(t, err, "rdma link %s: %s", strings.Join(args, " "), out)
}

func deviceRemoved(r *rig, s *stream) time.Duration {
	r.t.Cleanup(func() {
		if _, err := exec.Command("rdma", "link", "show", r.vm.Dev+"/1").CombinedOutput(); err != nil {
			_ = exec.Command("rdma", "link", "add", r.vm.Dev, "type", "rxe", "netdev", r.vm.Netdev).Run()
		}
	})
	start := time.Now()
	rdmaLink(r.t, "delete", r.vm.Dev)
	r.notes = append(r.notes, fmt.Sprintf("rdma link delete returned in %v", time.Since(start).Round(time.Millisecond)))
	time.Sleep(time.Second)
	rdmaLink(r.t, "add", r.vm.Dev, "type", "rxe", "netdev", r.vm.Netdev)
	return time.Since(start)
}

// driverKilled kills one side's driver with SIGKILL, waits a second and
// starts a new driver on the same directory, over the stale CnC.
func driverKilled(side string) func(r *rig, s *stream) time.Duration {
	return func(r *rig, s *stream) time.Duration {
		p, dir := &r.sub, r.subDir
		if side == "pub" {
			p, dir = &r.pub, r.pubDir
		}
		start := time.Now()
		(*p).kill()
		time.Sleep(time.Second)
		np, took, err := restartDriver(r.t, dir)
		require.NoError(r.t, err, "a new driver on %s over the stale CnC", dir)
		r.notes = append(r.notes, fmt.Sprintf("new %s driver started after %v over the stale CnC", side, took.Round(10*time.Millisecond)))
		*p = np
		return time.Since(start)
	}
}

// child is a client process of this test binary in a role (runRole).
func child(t *testing.T, role, dir, channel string, stream int32, ready string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"="+role, "IBGO_CHAOS_DIR="+dir, "IBGO_CHAOS_CHANNEL="+channel, fmt.Sprintf("IBGO_CHAOS_STREAM=%d", stream))
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case l := <-lines:
		require.Equal(t, ready, l, "the %s client", role)
	case <-time.After(30 * time.Second):
		t.Fatalf("the %s client did not say %q in 30 s", role, ready)
	}
	return cmd
}

// clientKilled starts a client process of one side's driver that takes
// part in the stream (a claim on the same publication, or a subscription
// of the same stream that stops reading), then kills it with SIGKILL. The
// driver must unblock the claim, or drop the dead subscriber, after the
// client liveness timeout; the stream must lose nothing.
func clientKilled(role string) func(r *rig, s *stream) time.Duration {
	return func(r *rig, s *stream) time.Duration {
		dir, ready := r.pubDir, "claimed"
		if role == "subscribe" {
			dir, ready = r.subDir, "subscribed"
		}
		start := time.Now()
		cmd := child(r.t, role, dir, s.channel, s.streamID, ready)
		time.Sleep(500 * time.Millisecond)
		require.NoError(r.t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		return time.Since(start)
	}
}

func oneScenarios() []oneScenario {
	return []oneScenario{
		{name: "RDMA device removed and re-added", media: ibOnly, n: 30_000, rate: 5_000, fault: deviceRemoved},
		{name: "subscriber's driver SIGKILLed, restarted", media: every, n: 30_000, rate: 5_000, expectLoss: true, fault: driverKilled("sub")},
		{name: "publisher's driver SIGKILLed, restarted", media: every, n: 30_000, rate: 5_000, expectLoss: true, fault: driverKilled("pub")},
		{name: "publishing client SIGKILLed holding a claim", media: every, n: 30_000, rate: 5_000, fault: clientKilled("claim")},
		{name: "subscribing client SIGKILLed (stopped reading)", media: every, n: 30_000, rate: 5_000, fault: clientKilled("subscribe")},
		// last: a CM exchange during a soft-RoCE port outage would wedge
		// the guest's CM for the rest of its life (docs/aeron.md)
		{name: "link down 1 s", media: ibOnly, n: 30_000, rate: 5_000, fault: linkDown(time.Second)},
		{name: "link down 10 s", media: ibOnly, n: 80_000, rate: 5_000, expectLoss: true, fault: linkDown(10 * time.Second)},
	}
}

// TestChaosOneGuest (issue 33): every fault of one guest, on every medium
// it applies to, with a row each (docs/reliability.md). aeron:udp between
// two drivers of one guest goes through lo, so the link faults are the
// two-guest test's (TestChaosTwoGuests).
func TestChaosOneGuest(t *testing.T) {
	vm := testutil.OneNode(t)
	var tb table
	defer tb.print("one guest, kernel " + kernelRelease())
	port := 26000
	for si, sc := range oneScenarios() {
		for _, m := range allMedia {
			if !sc.media(m) {
				continue
			}
			port += 2
			streamID := int32(chaosStreamBase + si)
			t.Run(strings.ReplaceAll(sc.name, " ", "_")+"/"+m.name, func(t *testing.T) {
				r := newRig(t, vm, fmt.Sprintf("%d", port))
				ch := fmt.Sprintf(m.channel, vm.IP, port)
				s := startStream(ch, streamID, r.pubDir, r.subDir, sc.n, sc.rate)
				waitRunning(t, s, sc.n/5)
				fault := sc.fault(r, s)
				s.wait()
				tb.add(t, r.row(sc.name, m.name, s, fault, sc.expectLoss))
			})
		}
	}
	for _, m := range allMedia[1:] {
		port += 2
		t.Run("memlock/"+m.name, func(t *testing.T) { tb.add(t, memlockLow(t, vm, m, port)) })
	}
	port += 2
	t.Run("shm-full", func(t *testing.T) { tb.add(t, shmFull(t, vm, port)) })
}

func kernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

// shmFree is what /dev/shm has free, in bytes (stat -f).
func shmFree(t *testing.T) int64 {
	out, err := exec.Command("stat", "-f", "-c", "%a %S", "/dev/shm").Output()
	require.NoError(t, err)
	var blocks, size int64
	_, err = fmt.Sscan(string(out), &blocks, &size)
	require.NoError(t, err, "stat -f said %q", out)
	return blocks * size
}

func newRig(t *testing.T, vm testutil.VMInfo, tag string) *rig {
	r := &rig{t: t, vm: vm, pubDir: "/dev/shm/chaos-pub-" + tag, subDir: "/dev/shm/chaos-sub-" + tag}
	var err error
	r.pub, err = startDriver(t, r.pubDir, "")
	require.NoError(t, err)
	r.sub, err = startDriver(t, r.subDir, "")
	require.NoError(t, err)
	t.Cleanup(func() {
		r.pub.stop()
		r.sub.stop()
		os.RemoveAll(r.pubDir)
		os.RemoveAll(r.subDir)
	})
	return r
}

// waitRunning waits until the subscriber has k messages: the fault comes
// in the middle of a running stream.
func waitRunning(t *testing.T, s *stream, k int) {
	end := time.Now().Add(time.Minute)
	for time.Now().Before(end) {
		if d, _, _, _, _, _ := s.tally.snapshot(); d >= k {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the stream did not start: %s", s.ev.String())
}

func (r *rig) row(scenario, medium string, s *stream, fault time.Duration, expectLoss bool) *row {
	distinct, delivered, dups, ooo, _, stall := s.tally.snapshot()
	seen := s.ev.String()
	crashed := false
	for _, p := range []*proc{r.pub, r.sub} {
		if d := p.died(); d != "" {
			r.notes = append(r.notes, d)
			crashed = true
		}
	}
	if len(r.notes) > 0 {
		seen = strings.Join(append([]string{seen}, r.notes...), "; ")
	}
	return &row{scenario: scenario, medium: medium, offered: int(s.offered.Load()), delivered: delivered, distinct: distinct,
		dups: dups, ooo: ooo, stall: stall, fault: fault, expectLoss: expectLoss, crashed: crashed, seen: seen,
		errs:     errSummary(r.pubDir, r.subDir),
		counters: "pub: " + fmtCounters(countersOf(r.pubDir)) + "; sub: " + fmtCounters(countersOf(r.subDir))}
}

// memlockLow: the subscriber's driver runs without CAP_IPC_LOCK under a
// 64 KiB RLIMIT_MEMLOCK, too little for an aeron:ib receive ring. The ib
// subscription must fail with an error that names the limit, in the
// client and in the error log; a udp stream through the same driver goes
// on untouched.
func memlockLow(t *testing.T, vm testutil.VMInfo, m medium, port int) *row {
	tag := fmt.Sprintf("%d", port)
	pubDir, subDir := "/dev/shm/chaos-pub-"+tag, "/dev/shm/chaos-sub-"+tag
	pub, err := startDriver(t, pubDir, "")
	require.NoError(t, err)
	mc := exec.Command(os.Args[0], "-test.run=^$")
	mc.Env = []string{roleEnv + "=memlock-driver", "IBGO_CHAOS_DIR=" + subDir}
	sub, err := startDriverCmd(t, subDir, mc)
	require.NoError(t, err)
	t.Cleanup(func() { pub.stop(); sub.stop(); os.RemoveAll(pubDir); os.RemoveAll(subDir) })
	var ev events
	c, err := connectClient(subDir, &ev, "subscriber")
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ch := fmt.Sprintf(m.channel, vm.IP, port)
	_, subErr := c.AddSubscription(ctx, ch, chaosStreamBase+90)
	refused := "the ib subscription was accepted"
	if subErr != nil {
		refused = "client: " + subErr.Error()
	}
	// beside it, udp through the same driver
	s := startStream(fmt.Sprintf(allMedia[0].channel, vm.IP, port+1), chaosStreamBase+91, pubDir, subDir, 5_000, 5_000)
	s.wait()
	distinct, delivered, dups, ooo, _, stall := s.tally.snapshot()
	r := &row{scenario: "RLIMIT_MEMLOCK 64 KiB, no CAP_IPC_LOCK (subscriber's driver); the row counts a udp stream beside it",
		medium: m.name, offered: int(s.offered.Load()), delivered: delivered, distinct: distinct, dups: dups, ooo: ooo, stall: stall,
		seen: refused + "; " + s.ev.String(), errs: errSummary(subDir), counters: "sub: " + fmtCounters(countersOf(subDir))}
	r.judge()
	if subErr == nil || !strings.Contains(strings.ToLower(subErr.Error()), "memlock") {
		r.verdict = "FAIL: no error naming the memlock limit"
		if subErr == nil {
			r.verdict = "FAIL: the subscription was accepted"
		}
	}
	if n, lines := errorsOf(subDir); n == 0 || !strings.Contains(strings.ToLower(strings.Join(lines, " ")), "memlock") {
		r.verdict = "FAIL: the error log does not name the memlock limit"
	}
	return r
}

// shmFull: /dev/shm fills up under a running stream. A new publication
// must be refused with a clear error; the running stream loses nothing.
func shmFull(t *testing.T, vm testutil.VMInfo, port int) *row {
	tag := fmt.Sprintf("%d", port)
	r := newRig(t, vm, tag)
	ch := fmt.Sprintf(allMedia[1].channel, vm.IP, port)
	s := startStream(ch, chaosStreamBase+95, r.pubDir, r.subDir, 30_000, 5_000)
	waitRunning(t, s, 6_000)
	filler := "/dev/shm/chaos-filler"
	free := shmFree(t)
	out, err := exec.Command("fallocate", "-l", fmt.Sprint(free), filler).CombinedOutput()
	if err != nil { // fallocate may stop short of the last blocks: fill the rest by writing
		t.Logf("fallocate %d: %v %s", free, err, out)
	}
	_ = exec.Command("sh", "-c", "cat /dev/zero >> "+filler).Run()
	t.Cleanup(func() { os.Remove(filler) })
	r.notes = append(r.notes, fmt.Sprintf("/dev/shm filled (%d bytes free)", shmFree(t)))
	var ev events
	c, err := connectClient(r.pubDir, &ev, "second publisher")
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, pubErr := c.AddPublication(ctx, fmt.Sprintf(allMedia[1].channel, vm.IP, port+1), chaosStreamBase+96)
	if pubErr != nil {
		r.notes = append(r.notes, "a new publication: "+pubErr.Error())
	} else {
		r.notes = append(r.notes, "a new publication was accepted")
	}
	time.Sleep(2 * time.Second)
	os.Remove(filler)
	s.wait()
	row := r.row("/dev/shm full under a running stream; a new publication added", allMedia[1].name, s, 0, false)
	if pubErr == nil {
		row.judge()
		row.verdict = "FAIL: a publication was created on a full /dev/shm"
	} else if !strings.Contains(pubErr.Error(), "storage") && !strings.Contains(pubErr.Error(), "space") {
		row.judge()
		row.verdict = "FAIL: the error does not say /dev/shm is full"
	}
	return row
}
