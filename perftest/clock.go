package perftest

import (
	"math"
	"os"
	"runtime"
	"sync"
	"time"
)

// The test loops read the time once or twice per message. perftest reads
// the CPU's cycle counter (get_cycles: RDTSC on x86) and converts with a CPU
// frequency it estimates at start-up, an estimate that fails on busy virtual
// machines ("Correlation coefficient r^2 < 0.9 ... Can't produce a report").
// ibgo reads the same counter (RDTSC on amd64, CNTVCT_EL0 on arm64) and
// converts with a ratio it measures against CLOCK_MONOTONIC, twice, over
// calibrateSpan each; when the two measurements disagree, or the counter is
// missing, or IBGO_PERF_CLOCK=monotonic, it reads CLOCK_MONOTONIC itself.
//
// Why not always the monotonic clock: on hardware it is a vDSO call of about
// 20 ns, but where the kernel does not trust the TSC (this project's TCG
// guest marks it unstable) it is a system call plus an emulated HPET read,
// 0.9 µs, and every read stalls the other vCPUs; that alone made ibgo's
// write_lat 1.16x perftest's. The counter costs 43 ns there.

const calibrateSpan = 10 * time.Millisecond

type clockSource struct {
	cycles    bool
	base      uint64
	nsPerTick float64
}

var (
	clk       clockSource
	clockOnce sync.Once
	epoch     = time.Now()
)

// initClock chooses and calibrates the clock, once per process.
func initClock() {
	clockOnce.Do(func() {
		if !haveCycles || os.Getenv("IBGO_PERF_CLOCK") == "monotonic" {
			return
		}
		if r, ok := calibrate(calibrateSpan); ok {
			clk = clockSource{cycles: true, base: cycles(), nsPerTick: r}
		}
	})
}

// calibrate measures nanoseconds per counter tick over span, twice, and
// accepts the mean only when the two agree within 0.2 % (a thread moved
// between CPUs whose counters differ, or a counter that changes rate, does
// not). Each end of a span is the best of several (monotonic, counter,
// monotonic) readings, the one whose monotonic bracket is narrowest: a
// reading the host interrupts (a vCPU descheduled between the two clocks)
// is not used.
func calibrate(span time.Duration) (float64, bool) {
	var r [2]float64
	for i := range r {
		m0, c0 := pairedReading()
		for time.Since(epoch)-time.Duration(m0) < span {
		}
		m1, c1 := pairedReading()
		if c1 <= c0 || m1 <= m0 {
			return 0, false
		}
		r[i] = float64(m1-m0) / float64(c1-c0)
	}
	if math.Abs(r[0]-r[1]) > 0.002*r[0] {
		return 0, false
	}
	return (r[0] + r[1]) / 2, true
}

// pairedReading returns a monotonic time (ns since epoch) and the counter
// read at that moment: the midpoint of the narrowest of 8 brackets.
func pairedReading() (mono int64, tick uint64) {
	best := int64(math.MaxInt64)
	for k := 0; k < 8; k++ {
		a := int64(time.Since(epoch))
		c := cycles()
		b := int64(time.Since(epoch))
		if b-a < best {
			best, mono, tick = b-a, a+(b-a)/2, c
		}
	}
	return mono, tick
}

// now is nanoseconds since an arbitrary origin. It only reads clk, which
// initClock wrote once before any test started: safe from any goroutine.
//
// The counter difference is taken as signed: a thread that moves to a CPU
// whose counter lags the one it was calibrated on reads a slightly earlier
// time (a negative difference), not an unsigned wrap to centuries. The
// interval statistics clamp such a backward step to zero (see latResult).
func (c *clockSource) now() int64 {
	if c.cycles {
		return int64(float64(int64(cycles()-c.base)) * c.nsPerTick)
	}
	return int64(time.Since(epoch))
}

// pacer lets the bandwidth loops pass through the scheduler every
// yieldEvery: a goroutine that runs 10 ms without doing so gets a
// preemption signal from the runtime's monitor, which under emulation costs
// about 0.3-0.4 ms a time (async preemption was 4-5 % of write_bw's time in
// the VM). The bandwidth loops call it before each post's timestamp and
// between polls, never between a timestamp and the post it stamps. The
// latency loops do not call it: every instant of a ping-pong is inside some
// sample, so they pass through the scheduler only while they wait for the
// peer (see peerGoneCheck).
//
// It reads the clock once the loop has done readEvery units of work since
// the last read: an idle poll is one unit, each work request posted
// postCost (a post list counts its length, up to listCap), a handled
// receive completion postCost too (it may repost). Counting calls alone was
// not enough: under emulation a UD send costs the sending thread about
// 46 us, the sending loop posts up to tx_depth of them between two of its
// outer iterations, and 64 iterations could run well past 10 ms, so the
// monitor's signals came back (ibgo's UD send_bw client was 5-9 % slower
// than perftest's; see docs/perf.md).
type pacer struct {
	work    uint32 // units since the clock was last read
	yieldAt int64
}

const (
	yieldEvery = 2e6 // ns
	readEvery  = 64  // units of work between clock reads
	postCost   = 4   // units per work request posted or receive handled; an idle poll is 1
	listCap    = 16  // a post list counts at most this many work requests
)

// postUnits is what one post of a list of n work requests counts: on rxe
// one doorbell carries the whole list, so its time grows with n.
func postUnits(n uint64) uint32 { return postCost * uint32(min(n, listCap)) }

// maybeYield accounts one idle poll.
func (p *pacer) maybeYield() { p.spend(1) }

// spend accounts units of work and, every readEvery of them, reads the
// clock and yields if the deadline has passed.
func (p *pacer) spend(units uint32) {
	p.work += units
	if p.work >= readEvery {
		p.work = 0
		p.yield()
	}
}

func (p *pacer) yield() { p.pass(clk.now(), yieldEvery) }

// pass goes through the scheduler if now is past the deadline and sets the
// next one every ns later. The bandwidth loops come here every yieldEvery;
// every loop's wait for the peer every waitYield (peerGoneCheck). Both
// share the one deadline, so a loop that does both does not yield twice.
func (p *pacer) pass(now, every int64) {
	if now >= p.yieldAt {
		p.yieldAt = now + every
		gosched()
	}
}

// gosched is runtime.Gosched (a variable so that a test can count the
// passes).
var gosched = runtime.Gosched
