//go:build linux

package chaos_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ibgo/ibgo/aeron/client"
	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/driver"
	"github.com/ibgo/ibgo/internal/testutil"
)

// The timeouts every chaos driver and client runs with: Aeron's defaults
// scaled down so that a dead driver or client is noticed in seconds, with
// the C driver's orderings kept (unblock > client liveness; image liveness
// and publication connection timeouts at their defaults).
const (
	driverTimeout   = 3 * time.Second
	clientLiveness  = 2 * time.Second
	unblockTimeout  = 4 * time.Second
	settle          = 12 * time.Second // no new delivery for this long ends a stream
	streamLimit     = 3 * time.Minute  // a whole stream, fault included
	msgLen          = 64
	chaosStreamBase = 7000
)

var driverEnv = []string{
	"AERON_DRIVER_TIMEOUT=" + fmt.Sprint(driverTimeout.Milliseconds()),
	"AERON_CLIENT_LIVENESS_TIMEOUT=" + clientLiveness.String(),
	"AERON_PUBLICATION_UNBLOCK_TIMEOUT=" + unblockTimeout.String(),
	"AERON_TERM_BUFFER_LENGTH=1m",
	"AERON_THREADING_MODE=SHARED",
	"AERON_SHARED_IDLE_STRATEGY=sleep-ns",
	"AERON_SHARED_IDLE_STRATEGY_INIT_ARGS=20000",
}

const roleEnv = "IBGO_CHAOS_ROLE"

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runRole(role, os.Getenv("IBGO_CHAOS_DIR"), os.Getenv("IBGO_CHAOS_CHANNEL"), os.Getenv("IBGO_CHAOS_STREAM")))
	}
	testutil.Main(m)
}

// runRole is a client process of a scenario that kills clients.
func runRole(role, dir, channel, stream string) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, role+": "+format+"\n", args...)
		return 2
	}
	switch role {
	case "driver":
		return soakDriver(dir)
	case "memlock-driver":
		return memlockDriver(dir)
	}
	var id int32
	fmt.Sscan(stream, &id)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, client.Options{Dir: dir, DriverTimeout: driverTimeout})
	if err != nil {
		return fail("%v", err)
	}
	switch role {
	case "claim": // claim a frame on the shared publication and hang without committing
		p, err := c.AddPublication(ctx, channel, id)
		if err != nil {
			return fail("%v", err)
		}
		var claim client.BufferClaim
		for {
			r := p.TryClaim(msgLen, &claim)
			if r > 0 {
				break
			}
			if r == client.Closed || r == client.PublicationError || r == client.MaxPositionExceeded {
				return fail("claim: %s", client.ResultString(r))
			}
			time.Sleep(100 * time.Microsecond)
		}
		fmt.Println("claimed")
	case "subscribe": // subscribe, read a little, then stop reading and hang
		s, err := c.AddSubscription(ctx, channel, id)
		if err != nil {
			return fail("%v", err)
		}
		for s.ImageCount() == 0 {
			time.Sleep(time.Millisecond)
		}
		got := 0
		for got < 100 {
			got += s.Poll(func([]byte, *client.Header) {}, 10)
		}
		fmt.Println("subscribed")
	default:
		return fail("unknown role")
	}
	select {} // until SIGKILL
}

// memlockDriver execs `ibgo driver` without CAP_IPC_LOCK (dropped from
// the bounding set, so root's exec does not get it back) and with a 64 KiB
// RLIMIT_MEMLOCK. The bounding set is a thread's: the drop and the exec
// happen on one locked thread.
func memlockDriver(dir string) int {
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_CAPBSET_DROP, unix.CAP_IPC_LOCK, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "prctl(PR_CAPBSET_DROP, CAP_IPC_LOCK):", err)
		return 2
	}
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: 64 << 10, Max: 64 << 10}); err != nil {
		fmt.Fprintln(os.Stderr, "setrlimit(RLIMIT_MEMLOCK):", err)
		return 2
	}
	path, err := exec.LookPath("ibgo")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	err = unix.Exec(path, []string{"ibgo", "driver", "--dir", dir}, os.Environ())
	fmt.Fprintln(os.Stderr, "exec ibgo driver:", err)
	return 2
}

// syncBuf is a bytes.Buffer an exec.Cmd and the test share.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is an `ibgo driver` process.
type proc struct {
	killed atomic.Bool
	dir    string
	cmd    *exec.Cmd
	out    *syncBuf
	done   chan struct{}
}

// startDriver starts `ibgo driver` on dir (sh -c, so that shell may set
// limits first: "ulimit -l 64; ") and waits for its heartbeat.
func startDriver(t *testing.T, dir, shellPrefix string, env ...string) (*proc, error) {
	t.Helper()
	return startDriverCmd(t, dir, exec.Command("sh", "-c", shellPrefix+"exec ibgo driver --dir "+dir), env...)
}

// startDriverCmd starts cmd, which runs `ibgo driver --dir dir` in the end.
func startDriverCmd(t *testing.T, dir string, cmd *exec.Cmd, env ...string) (*proc, error) {
	t.Helper()
	cmd.Env = append(append(append(os.Environ(), driverEnv...), env...), cmd.Env...)
	p := &proc{dir: dir, cmd: cmd, out: &syncBuf{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.stop() })
	end := time.Now().Add(20 * time.Second)
	for time.Now().Before(end) {
		select {
		case <-p.done:
			return nil, fmt.Errorf("ibgo driver --dir %s exited: %s", dir, strings.TrimSpace(p.out.String()))
		default:
		}
		// alive, and this process (not a killed driver's heartbeat, still
		// young, in a stale CnC)
		if ok, _, err := driver.IsDriverActive(dir, driverTimeout); err == nil && ok && cncPID(dir) == cmd.Process.Pid {
			return p, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.kill()
	return nil, fmt.Errorf("ibgo driver --dir %s: no heartbeat after 20 s: %s", dir, p.out.String())
}

// restartDriver starts a driver on a directory whose driver was killed: it
// retries while the stale CnC's heartbeat is younger than the driver
// timeout (the C driver refuses such a directory too).
func restartDriver(t *testing.T, dir string) (*proc, time.Duration, error) {
	start := time.Now()
	for {
		p, err := startDriver(t, dir, "")
		if err == nil {
			return p, time.Since(start), nil
		}
		if !strings.Contains(err.Error(), "active driver") || time.Since(start) > 3*driverTimeout {
			return nil, time.Since(start), err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func cncPID(dir string) int {
	f, err := cnc.Open(dir)
	if err != nil {
		return -1
	}
	defer f.Close()
	return int(f.PID())
}

func (p *proc) kill() {
	p.killed.Store(true)
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// died says how the driver ended if it ended by itself ("" while it runs).
func (p *proc) died() string {
	select {
	case <-p.done:
	default:
		return ""
	}
	if p.killed.Load() {
		return ""
	}
	out := strings.TrimSpace(p.out.String())
	if len(out) > 300 {
		out = "…" + out[len(out)-300:]
	}
	return fmt.Sprintf("the driver on %s died (%v): %s", p.dir, p.cmd.ProcessState, strings.ReplaceAll(out, "\n", " / "))
}

func (p *proc) stop() {
	p.killed.Store(true)
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.kill()
	}
}

// errorsOf is the distinct error log of the driver on dir: its number of
// entries and their descriptions, one line each.
func errorsOf(dir string) (int, []string) {
	f, err := cnc.Open(dir)
	if err != nil {
		return 0, []string{"cnc: " + err.Error()}
	}
	defer f.Close()
	var lines []string
	n, err := cnc.ReadErrorLog(f.ErrorLogBuffer(), 0, func(o cnc.Observation) {
		text := strings.Join(strings.Fields(o.Text), " ")
		lines = append(lines, fmt.Sprintf("%dx %s", o.Count, text))
	})
	if err != nil {
		lines = append(lines, "error log: "+err.Error())
	}
	return n, lines
}

// interesting are the counters a row shows when they are not zero.
var interesting = regexp.MustCompile(`^(NAKs sent|NAKs received|Retransmits sent|Loss gap fills|Errors|Client liveness timeouts|Unblocked Publications|Unblocked Control Commands|Publications ended with data unsent|Images ended without end of stream|Possible TTL Expired|Publications Revoked|Publication Images Revoked)|^aeron:ib: .*(error|restart|lost|removed|dropped|held while|re-resolution|failure|flushed|rebuild|disconnected|abandoned|evicted|empty)`)

// countersOf reads the non-zero interesting counters of the driver on dir.
func countersOf(dir string) map[string]int64 {
	out := map[string]int64{}
	f, err := cnc.Open(dir)
	if err != nil {
		return out
	}
	defer f.Close()
	r, err := f.Counters()
	if err != nil {
		return out
	}
	r.ForEach(func(c cnc.Counter) bool {
		if (c.TypeID == cnc.TypeSystem || c.TypeID == cnc.TypeMediaStatistic) && c.Value != 0 && interesting.MatchString(c.Label) {
			label := c.Label
			if i := strings.Index(label, ":"); i > 0 && c.TypeID == cnc.TypeSystem {
				label = label[:i]
			}
			out[strings.TrimPrefix(label, "aeron:ib: ")] += c.Value
		}
		return true
	})
	return out
}

func fmtCounters(m map[string]int64) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var b strings.Builder
	for i, k := range ks {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", k, m[k])
	}
	if b.Len() == 0 {
		return "-"
	}
	return b.String()
}

// tally counts what a subscriber delivered, by the sequence number each
// message carries. Safe for concurrent use.
type tally struct {
	mu        sync.Mutex
	seen      []bool
	distinct  int
	delivered int
	dups, ooo int
	max       int64
	last      time.Time
	stall     time.Duration // the longest gap between two deliveries
}

func newTally() *tally { return &tally{max: -1} }

func (t *tally) add(seq int64, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.delivered++
	if !t.last.IsZero() && now.Sub(t.last) > t.stall {
		t.stall = now.Sub(t.last)
	}
	t.last = now
	if seq < 0 || seq > 1<<26 {
		t.ooo++ // corrupt: counted as out of order and never as delivered
		return
	}
	for int64(len(t.seen)) <= seq {
		t.seen = append(t.seen, make([]bool, len(t.seen)+1024)...)
	}
	if t.seen[seq] {
		t.dups++
		return
	}
	t.seen[seq] = true
	t.distinct++
	if seq < t.max {
		t.ooo++
	} else {
		t.max = seq
	}
}

func (t *tally) snapshot() (distinct, delivered, dups, ooo int, last time.Time, stall time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.distinct, t.delivered, t.dups, t.ooo, t.last, t.stall
}

// events is what the clients saw: errors, images going.
type events struct {
	mu   sync.Mutex
	list []string // the first four
	n    int      // distinct
}

func (e *events) add(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := fmt.Sprintf(format, args...)
	for _, x := range e.list {
		if x == s {
			return
		}
	}
	e.n++
	if len(e.list) < 4 {
		e.list = append(e.list, s)
	}
}

func (e *events) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.list) == 0 {
		return "-"
	}
	if e.n > len(e.list) {
		return strings.Join(e.list, "; ") + fmt.Sprintf("; and %d more", e.n-len(e.list))
	}
	return strings.Join(e.list, "; ")
}

func (e *events) len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.list)
}

// stream is one scenario's traffic: a publisher client of the driver on
// pubDir offering n sequence-numbered messages (paced at rate a second, 0:
// as fast as the publication takes them) and a subscriber client of the
// driver on subDir counting them. Both reconnect when their driver dies,
// as an application that survives its driver does.
type stream struct {
	channel        string
	streamID       int32
	pubDir, subDir string
	n, rate        int
	offered        atomic.Int64
	tally          *tally
	ev             events
	pubDone        chan struct{}
	stopSub        chan struct{}
	subDone        chan struct{}
}

func startStream(channel string, streamID int32, pubDir, subDir string, n, rate int) *stream {
	s := &stream{channel: channel, streamID: streamID, pubDir: pubDir, subDir: subDir, n: n, rate: rate,
		tally: newTally(), pubDone: make(chan struct{}), stopSub: make(chan struct{}), subDone: make(chan struct{})}
	if subDir != "" {
		go s.subscribe()
	} else {
		close(s.subDone)
	}
	if pubDir != "" {
		go s.publish()
	} else {
		close(s.pubDone)
	}
	return s
}

func connectClient(dir string, ev *events, who string) (*client.Client, error) {
	return connectClientTimeout(dir, ev, who, driverTimeout)
}

func connectClientTimeout(dir string, ev *events, who string, timeout time.Duration) (*client.Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return client.Connect(ctx, client.Options{Dir: dir, DriverTimeout: timeout,
		OnError: func(err error) { ev.add("%s: %v", who, err) }})
}

func (s *stream) publish() {
	defer close(s.pubDone)
	msg := make([]byte, msgLen)
	var c *client.Client
	var p *client.Publication
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	start := time.Now()
	progress := time.Now()
	for seq := 0; seq < s.n; {
		if time.Since(progress) > streamLimit/2 {
			s.ev.add("publisher gave up at message %d: nothing offered for %v", seq, streamLimit/2)
			return
		}
		if p == nil {
			if c != nil {
				c.Close()
			}
			var err error
			c, err = connectClient(s.pubDir, &s.ev, "publisher")
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				p, err = c.AddPublication(ctx, s.channel, s.streamID)
				cancel()
			}
			if err != nil {
				s.ev.add("publisher: %v", err)
				time.Sleep(200 * time.Millisecond)
				continue
			}
		}
		if s.rate > 0 {
			if due := start.Add(time.Duration(seq) * time.Second / time.Duration(s.rate)); time.Until(due) > time.Millisecond {
				time.Sleep(time.Until(due))
			}
		}
		binary.LittleEndian.PutUint64(msg, uint64(seq))
		r := p.Offer(msg)
		switch {
		case r > 0:
			seq++
			s.offered.Add(1)
			progress = time.Now()
		case c.Err() != nil || r == client.Closed || r == client.MaxPositionExceeded || r == client.PublicationError:
			if c.Err() != nil {
				s.ev.add("publisher: %v", c.Err())
			} else {
				s.ev.add("publisher: offer: %s", client.ResultString(r))
			}
			p = nil
		default:
			time.Sleep(50 * time.Microsecond)
		}
	}
}

func (s *stream) subscribe() {
	defer close(s.subDone)
	var c *client.Client
	var sub *client.Subscription
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	handler := func(payload []byte, _ *client.Header) {
		if len(payload) < 8 {
			s.tally.add(-1, time.Now())
			return
		}
		s.tally.add(int64(binary.LittleEndian.Uint64(payload)), time.Now())
	}
	for {
		select {
		case <-s.stopSub:
			return
		default:
		}
		if sub == nil {
			if c != nil {
				c.Close()
			}
			var err error
			c, err = connectClient(s.subDir, &s.ev, "subscriber")
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				sub, err = c.AddSubscriptionWithHandlers(ctx, s.channel, s.streamID, nil, func(img *client.Image) {
					s.ev.add("subscriber: an image went unavailable")
				})
				cancel()
			}
			if err != nil {
				s.ev.add("subscriber: %v", err)
				time.Sleep(200 * time.Millisecond)
				continue
			}
		}
		if sub.Poll(handler, 256) == 0 {
			if c.Err() != nil {
				s.ev.add("subscriber: %v", c.Err())
				sub = nil
				continue
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
}

// wait waits for the publisher to finish, then for the subscriber to have
// everything offered or to go settle without a delivery.
func (s *stream) wait() {
	limit := time.After(streamLimit)
	select {
	case <-s.pubDone:
	case <-limit:
		s.ev.add("publisher still offering after %v", streamLimit)
	}
	quiet := time.Now()
	lastSeen := -1
	for {
		distinct, delivered, _, _, _, _ := s.tally.snapshot()
		if int64(distinct) >= s.offered.Load() {
			break
		}
		if delivered != lastSeen {
			lastSeen, quiet = delivered, time.Now()
		}
		if time.Since(quiet) > settle {
			break
		}
		select {
		case <-limit:
			s.ev.add("subscriber still short after %v", streamLimit)
			goto done
		case <-time.After(20 * time.Millisecond):
		}
	}
done:
	close(s.stopSub)
	<-s.subDone
}

// stop ends the subscriber of a stream nobody waits for.
func (s *stream) stop() {
	select {
	case <-s.stopSub:
	default:
		close(s.stopSub)
	}
	<-s.subDone
}

// row is one line of the table in docs/reliability.md.
type row struct {
	scenario, medium             string
	offered, delivered, distinct int
	dups, ooo                    int
	stall, fault                 time.Duration
	expectLoss                   bool // loss is the correct outcome; it must be visible
	crashed                      bool // a driver ended by itself
	seen                         string
	errs                         string
	counters                     string
	verdict                      string
}

func (r *row) lost() int { return r.offered - r.distinct }

// judge sets the verdict: a reliable stream lost, duplicated and reordered
// nothing; a stream whose loss is correct made it visible.
func (r *row) judge() {
	switch {
	case r.crashed:
		r.verdict = "FAIL: a driver died"
	case r.dups != 0 || r.ooo != 0:
		r.verdict = "FAIL: duplicated or out of order"
	case r.offered == 0:
		r.verdict = "FAIL: nothing offered"
	case r.lost() != 0 && !r.expectLoss:
		r.verdict = "FAIL: lost"
	case r.lost() != 0 && r.seen == "-" && r.errs == "-":
		r.verdict = "FAIL: lost, and nothing said so"
	case r.lost() != 0:
		r.verdict = "ok (loss visible)"
	default:
		r.verdict = "ok"
	}
}

func (r *row) recover() string {
	if r.fault == 0 {
		return fmt.Sprintf("stall %s", r.stall.Round(10*time.Millisecond))
	}
	return fmt.Sprintf("%s (stall %s)", max(r.stall-r.fault, 0).Round(10*time.Millisecond), r.stall.Round(10*time.Millisecond))
}

func (r *row) String() string {
	return fmt.Sprintf("| %s | %s | %d | %d | %d | %d | %d | %s | %s | %s | %s | %s |",
		r.scenario, r.medium, r.offered, r.delivered, r.lost(), r.dups, r.ooo, r.recover(), r.verdict, r.seen, r.errs, r.counters)
}

const tableHead = "| scenario | medium | offered | delivered | lost | dup | out of order | recovered after (longest stall) | verdict | the clients saw | error logs | counters |\n|---|---|---|---|---|---|---|---|---|---|---|---|"

// table collects rows and prints them, greppable ("chaos| "), at the end.
type table struct {
	mu   sync.Mutex
	rows []*row
}

func (tb *table) add(t *testing.T, r *row) {
	if r.verdict == "" {
		r.judge()
	}
	tb.mu.Lock()
	tb.rows = append(tb.rows, r)
	tb.mu.Unlock()
	t.Logf("chaos row: %s", r)
	if strings.HasPrefix(r.verdict, "FAIL") {
		t.Errorf("%s on %s: %s", r.scenario, r.medium, r.verdict)
	}
}

func (tb *table) print(title string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "chaos| ### %s\nchaos| \n", title)
	for _, l := range strings.Split(tableHead, "\n") {
		fmt.Fprintf(&b, "chaos| %s\n", l)
	}
	for _, r := range tb.rows {
		fmt.Fprintf(&b, "chaos| %s\n", r)
	}
	fmt.Print(b.String())
}

// errSummary is what both error logs held, in one cell.
func errSummary(dirs ...string) string {
	var parts []string
	for _, d := range dirs {
		n, lines := errorsOf(d)
		if n == 0 {
			continue
		}
		for i := range lines {
			if len(lines[i]) > 160 {
				lines[i] = lines[i][:160] + "…"
			}
			lines[i] = strings.ReplaceAll(lines[i], "|", "/")
		}
		parts = append(parts, fmt.Sprintf("%s: %d: %s", filepath.Base(d), n, strings.Join(lines, " · ")))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}
