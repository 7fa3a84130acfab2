package perftest

import (
	"io"
	"math"
	"strings"

	"github.com/ibgo/ibgo/uverbs"
)

// Verb is the RDMA operation a test measures.
type Verb int

const (
	Send Verb = iota
	Write
	Read
	Atomic
)

func (v Verb) title() string {
	return [...]string{"Send", "RDMA_Write", "RDMA_Read", "Atomic"}[v]
}

// Kind is bandwidth or latency.
type Kind int

const (
	BW Kind = iota
	LAT
)

// Test names one of the eight perftest programs (a plain value).
type Test struct {
	Verb Verb
	Kind Kind
}

// Name is the perftest program name without "ib_" (write_bw, send_lat, ...).
func (t Test) Name() string {
	v := [...]string{"send", "write", "read", "atomic"}[t.Verb]
	return v + map[Kind]string{BW: "_bw", LAT: "_lat"}[t.Kind]
}

// Tests lists every supported test.
var Tests = []Test{{Write, BW}, {Write, LAT}, {Read, BW}, {Read, LAT}, {Send, BW}, {Send, LAT}, {Atomic, BW}, {Atomic, LAT}}

// TestByName finds a test by "write_bw" or "ib_write_bw".
func TestByName(name string) (Test, bool) {
	name = strings.TrimPrefix(name, "ib_")
	for _, t := range Tests {
		if t.Name() == name {
			return t, true
		}
	}
	return Test{}, false
}

// Conn is a connection type.
type Conn int

const (
	RC Conn = iota
	UC
	UD
	XRC
	DC
	SRD
)

var connNames = [...]string{"RC", "UC", "UD", "XRC", "DC", "SRD"}

func (c Conn) String() string { return connNames[c] }

// Output verbosity (--output).
const (
	OutputFull = iota
	OutputBW
	OutputMsgRate
	OutputLat
)

// Defaults of perftest 4.5 (perftest_parameters.h).
const (
	defPort       = 18515
	defSizeBW     = 65536
	defSizeLat    = 2
	defSizeAtomic = 8
	defIters      = 1000
	defItersWB    = 5000
	defTxBW       = 128
	defTxLat      = 1
	defRxSend     = 512
	defRxRDMA     = 1
	defCQMod      = 100
	defQPTimeout  = 14
	defDuration   = 5
	maxSize       = 8388608
	maxInline     = 912
	maxInlineUD   = 884
	ucMaxRx       = 16000
	cqModSizeLim  = 8192
	maxIters      = 100000000
	defQKey       = 0x11111111
	defConnectFor = 10 // seconds the client keeps retrying the TCP connection
	minEQNum      = 0  // -X range (MIN_EQ_NUM, MAX_EQ_NUM)
	maxEQNum      = 2048
)

// Config is one side of one test: perftest's options as named fields.
// DefaultConfig gives perftest 4.5's defaults for a test; ParseArgs fills
// one from a perftest command line. Run validates a Config and derives
// what perftest derives from it (force_dependecies: TX depth capped by the
// iterations, CQ moderation, peak off for long runs, ...) on its own copy.
//
// The *Given fields say that a value was chosen rather than defaulted:
// perftest's rules treat the two differently (a UD size above the MTU is
// clamped when defaulted and refused when given, for example).
//
// A Config is a plain value: copy it freely; Run does not keep it.
type Config struct {
	Test   Test
	Server string // host to connect to; "" makes this side the server
	Port   int    // TCP port of the out-of-band exchange (-p)

	Dev       string // RDMA device (-d); "" the first
	IBPort    int    // device port (-i)
	GIDIndex  int    // -x; -1 when not given (RoCE then picks perftest's way)
	GIDGiven  bool
	IPv6      bool // --ipv6: prefer an IPv6 GID
	MTU       int  // bytes (-m); 0 the port's active MTU
	Conn      Conn // -c
	SL        int  // -S
	TClass    int  // --tclass
	PkeyIndex int  // --pkey_index
	QPTimeout int  // -u

	Size        int // message size (-s)
	SizeGiven   bool
	All         bool // -a: sizes 2 B .. 8 MiB
	Iters       int  // -n; 0 in duration mode after derivation
	Duration    int  // seconds (-D); 0: iterations mode
	Margin      int  // seconds (-f); -1 when not given
	MarginGiven bool
	RunInf      bool // --run_infinitely
	Bidir       bool // -b
	NumQPs      int  // -q
	TxDepth     int  // -t
	RxDepth     int  // -r
	RxGiven     bool
	Inline      int // -I; -1: the default for the device
	CQMod       int // -Q
	CQModGiven  bool
	PostList    int // -l
	RecvPostLst int // --recv_post_list
	OutReads    int // -o; 0: the device maximum
	AtomicCAS   bool
	UseSRQ      bool // --use-srq
	HugePages   bool // --use_hugepages
	WarmUp      bool // --perform_warm_up
	LatencyGap  int  // --latency_gap, nanoseconds between latency posts
	NoPeak      bool // -N
	Events      bool // -e: wait for completion events instead of spinning on the CQs
	CompVector  int  // -X: the CQs' completion vector (with -e)
	VectorGiven bool
	CommCM      bool       // -z: the exchange runs over an rdma_cm RC connection, not TCP
	WorkCM      bool       // -R: the test QPs are connected by rdma_cm too (implies CommCM)
	TOS         int        // -T: the -R ids' type of service; -1 leaves the kernel's
	RetryCount  int        // --retry_count: -R's retry and RNR retry counts (7)
	Mcast       bool       // -g: UD sends to a multicast group
	MGID        uverbs.GID // -M: the group (with -g); perftest's default otherwise
	MGIDGiven   bool
	CPUFreqF    bool // -F, accepted for compatibility
	DontXchg    bool // --dont_xchg_versions (refused at run time, see Run)
	ConnectFor  int  // --connect_timeout: seconds the client retries the server

	Output      int  // --output: OutputFull or one number per line
	ReportGbits bool // --report_gbits
	ReportBoth  bool // --report-both
	CPUUtil     bool // --cpu_util
	Unsorted    bool // -U
	Histogram   bool // -H
	Cycles      bool // -C
	LimitBW     float64
	LimitMR     float64
	JSON        bool   // --json: JSON lines instead of the table
	JSONFile    string // --out_json / --out_json_file (written by Main)

	// Stdout and Stderr receive perftest's output: the banner, the address
	// lines, the table (Stdout) and warnings (Stderr). nil discards it.
	Stdout io.Writer
	Stderr io.Writer

	derived bool // check and derive have run (ParseArgs, or Run on its copy)
}

// DefaultConfig returns perftest 4.5's defaults for test t, server side
// (set Server to make it the client).
func DefaultConfig(t Test) Config { return *defaults(t) }

func defaults(t Test) *Config {
	p := &Config{Test: t, IBPort: 1, GIDIndex: -1, Port: defPort, NumQPs: 1, QPTimeout: defQPTimeout,
		Inline: -1, CQMod: defCQMod, PostList: 1, RecvPostLst: 1, Output: OutputFull, ConnectFor: defConnectFor,
		TOS: -1, RetryCount: 7}
	if t.Kind == BW {
		p.Size, p.TxDepth = defSizeBW, defTxBW
	} else {
		p.Size, p.TxDepth = defSizeLat, defTxLat
	}
	if t.Verb == Atomic {
		p.Size = defSizeAtomic
	}
	p.Iters = defIters
	if t.Kind == BW && t.Verb == Write {
		p.Iters = defItersWB
	}
	p.RxDepth = defRxRDMA
	if t.Verb == Send {
		p.RxDepth = defRxSend
	}
	p.Margin = -1
	return p
}

// check applies perftest's rules, with its messages.
func (p *Config) check() error {
	t := p.Test
	bw, lat := t.Kind == BW, t.Kind == LAT
	switch {
	case p.Size < 1 || p.Size > math.MaxInt32:
		return perr(" Message Size should be between 1 and 2147483647")
	case p.Iters < 5 || p.Iters > maxIters:
		return perr(" Iteration num should be between 5 and %d", maxIters)
	case p.TxDepth < 1 || p.TxDepth > 15000:
		return perr(" Tx depth should be between 1 and 15000")
	case p.CQMod < 1 || p.CQMod > 1024:
		return perr(" CQ moderation should be between 1 and 1024")
	case p.SL < 0 || p.SL > 15:
		return perr(" Only 15 Service levels")
	case p.GIDGiven && (p.GIDIndex < 0 || p.GIDIndex > 64):
		return perr(" Gid index should be between 0 and 64")
	case p.NumQPs < 1 || p.NumQPs > 16384:
		return perr(" num of Qps should be between 1 and 16384")
	case p.Inline != -1 && (p.Inline < 0 || p.Inline > maxInline):
		return perr(" Max inline should be between 0 and %d", maxInline)
	case p.Port <= 0 || p.Port > 65535:
		return perr(" Port argument %d should be int", p.Port)
	case p.IBPort < 1:
		return perr(" IB Port should be at least 1")
	case p.MTU != 0 && p.MTU != 256 && p.MTU != 512 && p.MTU != 1024 && p.MTU != 2048 && p.MTU != 4096:
		return perr(" Invalid MTU - %d . Please use 256, 512, 1024, 2048 or 4096", p.MTU)
	case p.PostList < 1:
		return perr(" Post list size should be at least 1")
	case p.ConnectFor < 0:
		return perr(" Connect timeout must be zero or positive")
	}
	if lat {
		switch {
		case p.NumQPs > 1:
			return perr(" Multiple QPs only available on bw tests")
		case p.Bidir:
			return perr(" Bidirectional is only available in BW test")
		case p.NoPeak:
			return perr(" NoPeak only valid for BW tests")
		case p.RunInf:
			return perr(" run_infinitely exists only in BW tests for now.")
		case p.PostList > 1:
			return perr("Post list is supported in BW tests only")
		case p.ReportBoth:
			return perr(" report-both is only available in BW tests")
		}
	}
	if bw {
		switch {
		case p.Cycles || p.Histogram:
			return perr(" Available only on Latency tests")
		case p.Unsorted:
			return perr(" is Available only on Latency tests")
		case p.LatencyGap != 0:
			return perr(" Latency gap feature is only for latency tests")
		}
	}
	if p.Output == OutputLat && bw {
		return perr(" Output verbosity level for BW can be: bandwidth, message_rate")
	}
	if (p.Output == OutputBW || p.Output == OutputMsgRate) && lat {
		return perr(" Output verbosity level for LAT can be: latency")
	}
	switch p.Conn {
	case XRC, DC, SRD:
		return perr(" %s connection is not supported by this device/provider (ibgo runs RC, UC and UD)", p.Conn)
	case UD:
		if t.Verb != Send {
			return perr(" UD connection only possible in SEND verb")
		}
	case UC:
		if t.Verb == Read || t.Verb == Atomic {
			return perr(" UC connection not possible in READ/ATOMIC verbs")
		}
	}
	if p.Duration != 0 || p.MarginGiven {
		if p.MarginGiven && p.Duration == 0 {
			p.Duration = defDuration
		}
		if p.Duration <= 0 {
			return perr(" Duration period must be positive")
		}
		if p.All {
			return perr("Duration mode currently doesn't support running on all sizes.")
		}
		m := p.Margin
		if !p.MarginGiven {
			m = p.Duration / 4
		}
		if p.Duration <= 2*m {
			return perr("please check that DURATION > 2*MARGIN")
		}
	}
	if p.Events && p.Duration != 0 {
		return perr("Duration mode doesn't work with events.")
	}
	if p.Events && p.RunInf {
		return perr(" run_infinitely does not support events feature yet.")
	}
	if p.VectorGiven && !p.Events {
		return perr(" Events must be enabled to select a completion vector")
	}
	if p.WorkCM {
		switch {
		case p.Conn == UC:
			return perr(" UC is not supported in librdmacm")
		case p.Mcast:
			return perr(" Perftest still doesn't support Multicast with rdma_cm")
		}
	} else if p.TOS != -1 {
		return perr(" TOS only valid for rdma_cm based QP and RawEth QP ")
	}
	if p.Mcast {
		if p.Bidir {
			return perr("Bidirectional mode not supported in multicast")
		}
		if p.NumQPs > 1 {
			return perr("Only 1 QP supported in multicast")
		}
	}
	if p.RunInf && t.Verb == Send && p.Bidir {
		return perr(" run_infinitely mode is not supported in SEND Bidirectional BW test")
	}
	if p.OutReads != 0 && t.Verb != Read && t.Verb != Atomic {
		return perr(" Setting Outstanding reads only available on READ verb")
	}
	if p.RxGiven && t.Verb != Send && p.RxDepth != 1 {
		return perr(" On RDMA verbs rx depth can be only 1")
	}
	if p.UseSRQ && t.Verb != Send {
		return perr(" Using SRQ only avavilible in SEND tests.")
	}
	if t.Verb == Atomic && p.SizeGiven && p.Size != defSizeAtomic {
		return perr("Message size cannot be changed for Atomic tests ")
	}
	if p.AtomicCAS && t.Verb != Atomic {
		return perr(" You are not running the atomic_lat/bw test!\n To change the atomic action type, you must run one of the atomic tests")
	}
	if p.PostList > 1 && p.Duration == 0 && p.Iters%p.PostList != 0 {
		return perr("Number of iterations must be a multiple of post list size")
	}
	if p.PostList > 1 && p.CQModGiven && p.PostList%p.CQMod != 0 {
		return perr("Post list size must be a multiple of CQ moderation")
	}
	if p.Conn == UD && p.Inline > maxInlineUD {
		return perr(" Max inline should be between 0 and %d", maxInlineUD)
	}
	return nil
}

// derive sets what perftest computes from the parameters
// (perftest_parameters.c: force_dependecies).
func (p *Config) derive() (notices []string) {
	if p.Duration != 0 {
		// perftest zeroes the iterations in duration mode (the loops then
		// run on the clock alone; --run_infinitely keeps them).
		p.Iters = 0
	}
	if p.Duration != 0 && !p.MarginGiven {
		p.Margin = p.Duration / 4
	}
	if p.Duration == 0 && p.RunInf {
		p.Duration = defDuration
	}
	iterMode := p.Duration == 0 && !p.RunInf
	if iterMode {
		if p.TxDepth > p.Iters {
			p.TxDepth = p.Iters
		}
		if p.Test.Verb == Send && p.RxDepth > p.Iters {
			p.RxDepth = p.Iters
		}
		if (p.Conn == UD || p.Conn == UC) && p.RxDepth == defRxSend {
			p.RxDepth = min(p.Iters, ucMaxRx)
		}
	}
	// perftest keeps cq_mod with events: many processes waiting on events
	// for every completion misbehaved (force_dependecies says so).
	if p.Size > cqModSizeLim && p.Conn != UD && !p.All && !p.Events {
		if !p.CQModGiven {
			p.CQMod = 1
		} else if p.CQMod > 1 {
			notices = append(notices, resultLine+"Warning: Large message requested and CQ moderation enabled\nWarning: It can lead to inaccurate results\n")
		}
	}
	if p.PostList > 1 && !p.CQModGiven {
		p.CQMod = p.PostList
		notices = append(notices, resultLine+"Post List requested - CQ moderation will be the size of the post list\n")
	}
	if p.CQMod > p.TxDepth {
		p.CQMod = p.TxDepth
	}
	if p.Test.Verb == Read || p.Test.Verb == Atomic {
		p.Inline = 0
	}
	if !iterMode {
		p.NoPeak = true
	}
	if p.Test.Verb == Send && p.Test.Kind == BW && p.Server == "" && !p.Bidir {
		p.NoPeak = true
	}
	// perftest silently turns the O(n^2) peak off for long runs.
	if p.Iters > 20000 {
		p.NoPeak = true
	}
	if p.RxDepth%2 == 1 && p.Test.Verb == Send && p.Conn != UD && p.RxGiven {
		p.RxDepth++
	}
	// perftest turns -g into UD after the rules above have used the
	// connection type it was given (force_dependecies), so a 64 KiB -g
	// run keeps cq_mod 1 as an RC one would.
	if p.Mcast {
		p.Conn = UD
	}
	p.derived = true
	return notices
}

// Usage is ibgo's help for a test.

// prepare validates c and derives perftest's dependent values, once.
func (c *Config) prepare() (notices []string, err error) {
	if c.derived {
		return nil, nil
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	notices = c.derive()
	// derive may clamp cq_mod to tx_depth; a list must still hold whole
	// cq_mod groups, or a completion (which stands for cq_mod WRs) would
	// stand for WRs of the next list and the loops would miscount.
	if c.PostList > 1 && c.PostList%c.CQMod != 0 {
		return nil, perr("Post list size (%d) must be a multiple of CQ moderation (%d, capped at the TX depth %d)", c.PostList, c.CQMod, c.TxDepth)
	}
	return notices, nil
}
