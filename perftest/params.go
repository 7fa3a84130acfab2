package perftest

import (
	"fmt"
	"math"
	"strconv"
	"strings"
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

// Test names one of the eight perftest programs.
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
)

// Params are a test's parameters, after parsing and the dependencies
// perftest derives (force_dependecies).
type Params struct {
	Test        Test
	Prog        string // the name errors are reported under
	Server      string // host to connect to; "" makes this side the server
	Dev         string
	IBPort      int
	GIDIndex    int // -1: not given
	GIDGiven    bool
	Conn        Conn
	Size        int
	SizeGiven   bool
	All         bool
	Iters       int
	Duration    int // seconds; 0: iterations mode
	Margin      int
	MarginGiven bool
	RunInf      bool
	Bidir       bool
	NumQPs      int
	MTU         int // bytes; 0: the port's active MTU
	TxDepth     int
	RxDepth     int
	RxGiven     bool
	Inline      int // -1: default
	CQMod       int
	CQModGiven  bool
	CPUFreqF    bool
	Port        int
	SL          int
	QPTimeout   int
	ReportGbits bool
	WarmUp      bool
	CPUUtil     bool
	Unsorted    bool
	Histogram   bool
	Cycles      bool
	NoPeak      bool
	PostList    int
	Notices     []string // what perftest prints on stdout while it parses, in order
	RecvPostLst int
	Output      int
	ReportBoth  bool
	OutReads    int // -o
	AtomicCAS   bool
	IPv6        bool
	TClass      int
	PkeyIndex   int
	LimitBW     float64
	LimitMR     float64
	HugePages   bool
	UseSRQ      bool
	JSON        bool   // --json: JSON lines instead of the table
	JSONFile    string // --out_json / --out_json_file
	ConnectFor  int    // --connect_timeout
	LatencyGap  int
	DontXchg    bool
	Help        bool
	Version     bool
}

// ParseError is a command line perftest refuses; Msg is printed as
// perftest prints it.
type ParseError struct {
	Msg       string
	ShowUsage bool
}

func (e *ParseError) Error() string { return e.Msg }

func perr(format string, args ...any) error { return &ParseError{Msg: fmt.Sprintf(format, args...)} }

type opt struct {
	short  byte
	long   string
	hasArg bool
	set    func(p *Params, v string) error
}

func intArg(name string, dst *int) func(*Params, string) error {
	return func(p *Params, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 0, 64)
		if err != nil || n > math.MaxInt32 || n < math.MinInt32 {
			return perr(" %s argument %s should be int", name, v)
		}
		*dst = int(n)
		return nil
	}
}

// sizeArg parses -s: a number with an optional K or M suffix.
func sizeArg(v string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(v, "K"), strings.HasSuffix(v, "k"):
		mult, v = 1024, v[:len(v)-1]
	case strings.HasSuffix(v, "M"), strings.HasSuffix(v, "m"):
		mult, v = 1024*1024, v[:len(v)-1]
	}
	n, err := strconv.ParseInt(v, 0, 64)
	if err != nil {
		return 0, err
	}
	return int(n) * mult, nil
}

// unsupported names flags perftest has that ibgo refuses, with the reason.
var unsupported = map[string]string{
	"R":                "rdma_cm connections (-R/--rdma_cm) need ibgo's cm package, which is not done yet",
	"z":                "rdma_cm data exchange (-z/--comm_rdma_cm) needs ibgo's cm package, which is not done yet",
	"O":                "dual-port mode (-O/--dualport) is not supported",
	"e":                "CQ events (-e/--events) are not supported yet",
	"X":                "completion vectors (-X/--vector) need -e, which is not supported yet",
	"g":                "multicast (-g/--mcg) is not supported yet",
	"M":                "multicast (-M/--MGID) is not supported yet",
	"W":                "performance counters (-W/--report-counters) are not supported",
	"L":                "hop limit (-L/--hop_limit) applies to raw Ethernet QPs, which ibgo does not offer",
	"T":                "TOS (-T/--tos) applies to rdma_cm QPs, which ibgo does not offer yet",
	"j":                "raw Ethernet options are not supported",
	"use_cuda":         "GPU memory (--use_cuda) is not supported: ibgo is built without CUDA",
	"use_cuda_bus_id":  "GPU memory (--use_cuda_bus_id) is not supported: ibgo is built without CUDA",
	"use_rocm":         "GPU memory (--use_rocm) is not supported",
	"mmap":             "--mmap (P2P file buffers) is not supported",
	"mmap-offset":      "--mmap-offset is not supported",
	"odp":              "--odp (on-demand paging) is not supported by ibgo's providers",
	"rate_limit":       "the rate limiter (--rate_limit) is not supported",
	"rate_units":       "the rate limiter (--rate_units) is not supported",
	"rate_limit_type":  "the rate limiter (--rate_limit_type) is not supported",
	"burst_size":       "the rate limiter (--burst_size) is not supported",
	"typical_pkt_size": "the rate limiter (--typical_pkt_size) is not supported",
	"report-per-port":  "--report-per-port needs dual-port mode, which is not supported",
	"reversed":         "--reversed is not supported",
	"mr_per_qp":        "--mr_per_qp is not supported",
	"dlid":             "--dlid (InfiniBand LID routing) is not supported",
	"force-link":       "--force-link is not supported",
	"wait_destroy":     "--wait_destroy is not supported",
	"aes_xts":          "AES-XTS encryption is not supported",
	"inline_recv":      "--inline_recv is not supported",
	"log_dci_streams":  "DC is not supported",
	"source_ip":        "--source_ip is not supported",
	"retry_count":      "--retry_count applies to rdma_cm QPs, which ibgo does not offer yet",
}

func options() []opt {
	var o []opt
	add := func(short byte, long string, hasArg bool, set func(*Params, string) error) {
		o = append(o, opt{short, long, hasArg, set})
	}
	flag := func(f func(p *Params)) func(*Params, string) error {
		return func(p *Params, _ string) error { f(p); return nil }
	}
	add('p', "port", true, func(p *Params, v string) error { return intArg("Port", &p.Port)(p, v) })
	add('d', "ib-dev", true, func(p *Params, v string) error { p.Dev = v; return nil })
	add('i', "ib-port", true, func(p *Params, v string) error { return intArg("IB Port", &p.IBPort)(p, v) })
	add('m', "mtu", true, func(p *Params, v string) error { return intArg("MTU", &p.MTU)(p, v) })
	add('n', "iters", true, func(p *Params, v string) error { return intArg("Iterations", &p.Iters)(p, v) })
	add('t', "tx-depth", true, func(p *Params, v string) error { return intArg("TX depth", &p.TxDepth)(p, v) })
	add('r', "rx-depth", true, func(p *Params, v string) error { p.RxGiven = true; return intArg("RX depth", &p.RxDepth)(p, v) })
	add('u', "qp-timeout", true, func(p *Params, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 255 {
			return perr(" QP Timeout argument %s should be uint8_t", v)
		}
		p.QPTimeout = n
		return nil
	})
	add('S', "sl", true, func(p *Params, v string) error { return intArg("SL", &p.SL)(p, v) })
	add('x', "gid-index", true, func(p *Params, v string) error { p.GIDGiven = true; return intArg("GID index", &p.GIDIndex)(p, v) })
	add('c', "connection", true, func(p *Params, v string) error {
		for i, n := range connNames {
			if strings.EqualFold(v, n) {
				p.Conn = Conn(i)
				return nil
			}
		}
		return perr(" Invalid Connection type. Please choose from {RC,UC,UD,XRC,DC,SRD}")
	})
	add('s', "size", true, func(p *Params, v string) error {
		n, err := sizeArg(v)
		if err != nil {
			return perr(" Message Size should be between 1 and 2147483647")
		}
		p.Size, p.SizeGiven = n, true
		return nil
	})
	add('a', "all", false, flag(func(p *Params) { p.All = true }))
	add('D', "duration", true, func(p *Params, v string) error { return intArg("Duration", &p.Duration)(p, v) })
	add('f', "margin", true, func(p *Params, v string) error { p.MarginGiven = true; return intArg("Margin", &p.Margin)(p, v) })
	add('b', "bidirectional", false, flag(func(p *Params) { p.Bidir = true }))
	add('q', "qp", true, func(p *Params, v string) error { return intArg("Number of QPs", &p.NumQPs)(p, v) })
	add('I', "inline_size", true, func(p *Params, v string) error { return intArg("Inline size", &p.Inline)(p, v) })
	add('Q', "cq-mod", true, func(p *Params, v string) error { p.CQModGiven = true; return intArg("CQ moderation", &p.CQMod)(p, v) })
	add('l', "post_list", true, func(p *Params, v string) error { return intArg("Post list", &p.PostList)(p, v) })
	add(0, "recv_post_list", true, func(p *Params, v string) error { return intArg("Receive post list", &p.RecvPostLst)(p, v) })
	add('F', "CPU-freq", false, flag(func(p *Params) { p.CPUFreqF = true }))
	add('N', "noPeak", false, flag(func(p *Params) { p.NoPeak = true }))
	add('C', "report-cycles", false, flag(func(p *Params) { p.Cycles = true }))
	add('H', "report-histogrm", false, flag(func(p *Params) { p.Histogram = true }))
	add('U', "report-unsorted", false, flag(func(p *Params) { p.Unsorted = true }))
	add('o', "outs", true, func(p *Params, v string) error { return intArg("Outstanding reads", &p.OutReads)(p, v) })
	add('A', "atomic_type", true, func(p *Params, v string) error {
		switch v {
		case "CMP_AND_SWAP":
			p.AtomicCAS = true
		case "FETCH_AND_ADD":
			p.AtomicCAS = false
		default:
			return perr(" Invalid Atomic type! please choose from {CMP_AND_SWAP,FETCH_AND_ADD}")
		}
		return nil
	})
	add('w', "limit_bw", true, func(p *Params, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return perr(" Invalid BW limit %s", v)
		}
		p.LimitBW = f
		return nil
	})
	add('y', "limit_msgrate", true, func(p *Params, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return perr(" Invalid message rate limit %s", v)
		}
		p.LimitMR = f
		return nil
	})
	add('h', "help", false, flag(func(p *Params) { p.Help = true }))
	add('V', "version", false, flag(func(p *Params) { p.Version = true }))
	add(0, "report_gbits", false, flag(func(p *Params) { p.ReportGbits = true }))
	add(0, "run_infinitely", false, flag(func(p *Params) { p.RunInf = true }))
	add(0, "perform_warm_up", false, flag(func(p *Params) { p.WarmUp = true }))
	add(0, "cpu_util", false, flag(func(p *Params) { p.CPUUtil = true }))
	add(0, "report-both", false, flag(func(p *Params) { p.ReportBoth = true }))
	add(0, "ipv6", false, flag(func(p *Params) { p.IPv6 = true }))
	add(0, "use_hugepages", false, flag(func(p *Params) { p.HugePages = true }))
	add(0, "use-srq", false, flag(func(p *Params) { p.UseSRQ = true }))
	add(0, "use_old_post_send", false, flag(func(p *Params) {}))
	add(0, "disable_pcie_relaxed", false, flag(func(p *Params) {}))
	add(0, "dont_xchg_versions", false, flag(func(p *Params) { p.DontXchg = true }))
	add(0, "tclass", true, func(p *Params, v string) error { return intArg("Traffic class", &p.TClass)(p, v) })
	add(0, "pkey_index", true, func(p *Params, v string) error { return intArg("Pkey index", &p.PkeyIndex)(p, v) })
	add(0, "latency_gap", true, func(p *Params, v string) error { return intArg("Latency gap", &p.LatencyGap)(p, v) })
	add(0, "output", true, func(p *Params, v string) error {
		switch v {
		case "bandwidth":
			p.Output = OutputBW
		case "message_rate":
			p.Output = OutputMsgRate
		case "latency":
			p.Output = OutputLat
		default:
			return perr(" Invalid verbosity level output flag. Please use bandwidth, latency, message_rate")
		}
		return nil
	})
	add(0, "out_json", false, flag(func(p *Params) {
		if p.JSONFile == "" {
			p.JSONFile = "perftest_out.json"
		}
	}))
	add(0, "out_json_file", true, func(p *Params, v string) error { p.JSONFile = v; return nil })
	add(0, "json", false, flag(func(p *Params) { p.JSON = true }))
	add(0, "connect_timeout", true, func(p *Params, v string) error { return intArg("Connect timeout", &p.ConnectFor)(p, v) })
	return o
}

func defaults(t Test, prog string) *Params {
	p := &Params{Test: t, Prog: prog, IBPort: 1, GIDIndex: -1, Port: defPort, NumQPs: 1, QPTimeout: defQPTimeout,
		Inline: -1, CQMod: defCQMod, PostList: 1, RecvPostLst: 1, Output: OutputFull, ConnectFor: defConnectFor}
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

// Parse reads a perftest command line (args without the program name) for
// test t. prog names the program in messages.
func Parse(t Test, prog string, args []string) (*Params, error) {
	p := defaults(t, prog)
	opts := options()
	byShort := map[byte]opt{}
	byLong := map[string]opt{}
	for _, o := range opts {
		if o.short != 0 {
			byShort[o.short] = o
		}
		byLong[o.long] = o
	}
	var positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			positional = append(positional, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a[2:], "=")
			if why, ok := unsupported[name]; ok {
				return nil, perr(" %s: %s", "--"+name, why)
			}
			o, ok := byLong[name]
			if !ok {
				return nil, &ParseError{Msg: fmt.Sprintf("%s: unrecognized option '%s'\n Invalid Command or flag.\n Please check command line and run again.", prog, a), ShowUsage: true}
			}
			if o.hasArg && !hasVal {
				if i+1 >= len(args) {
					return nil, &ParseError{Msg: fmt.Sprintf("%s: option '--%s' requires an argument", prog, name), ShowUsage: true}
				}
				i++
				val = args[i]
			} else if !o.hasArg && hasVal {
				return nil, &ParseError{Msg: fmt.Sprintf("%s: option '--%s' doesn't allow an argument", prog, name), ShowUsage: true}
			}
			if err := o.set(p, val); err != nil {
				return nil, err
			}
		case len(a) > 1 && a[0] == '-':
			// Short options, possibly grouped (-bF) or with the value attached (-s64).
			for j := 1; j < len(a); j++ {
				c := a[j]
				if why, ok := unsupported[string(c)]; ok {
					return nil, perr(" -%c: %s", c, why)
				}
				o, ok := byShort[c]
				if !ok {
					return nil, &ParseError{Msg: fmt.Sprintf("%s: invalid option -- '%c'\n Invalid Command or flag.\n Please check command line and run again.", prog, c), ShowUsage: true}
				}
				if !o.hasArg {
					if err := o.set(p, ""); err != nil {
						return nil, err
					}
					continue
				}
				val := a[j+1:]
				if val == "" {
					if i+1 >= len(args) {
						return nil, &ParseError{Msg: fmt.Sprintf("%s: option requires an argument -- '%c'", prog, c), ShowUsage: true}
					}
					i++
					val = args[i]
				}
				if err := o.set(p, val); err != nil {
					return nil, err
				}
				break
			}
		default:
			positional = append(positional, a)
		}
	}
	if p.Help || p.Version {
		return p, nil
	}
	switch len(positional) {
	case 0:
	case 1:
		p.Server = positional[0]
	default:
		return nil, perr(" Invalid Command line. Please check command rerun ")
	}
	if err := p.check(); err != nil {
		return nil, err
	}
	p.derive()
	return p, nil
}

// check applies perftest's rules, with its messages.
func (p *Params) check() error {
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
func (p *Params) derive() {
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
	if p.Size > cqModSizeLim && p.Conn != UD && !p.All {
		if !p.CQModGiven {
			p.CQMod = 1
		} else if p.CQMod > 1 {
			p.Notices = append(p.Notices, resultLine+"Warning: Large message requested and CQ moderation enabled\nWarning: It can lead to inaccurate results\n")
		}
	}
	if p.PostList > 1 && !p.CQModGiven {
		p.CQMod = p.PostList
		p.Notices = append(p.Notices, resultLine+"Post List requested - CQ moderation will be the size of the post list\n")
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
}

// Usage is ibgo's help for a test.
func Usage(t Test, prog string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage:\n  %s            start a server and wait for connection\n  %s <host>     connect to server at <host>\n\n", prog, prog)
	b.WriteString("Options (perftest's flags, same meaning and defaults):\n")
	lines := []string{
		"-a, --all                    sizes 2 B .. 8 MiB",
		"-c, --connection=RC|UC|UD    connection type (default RC; UD for send only)",
		"-d, --ib-dev=DEV             RDMA device (default: the first)",
		"-D, --duration=SECS          run for SECS seconds instead of -n iterations",
		"-f, --margin=SECS            warm-up and cool-down excluded from -D (default duration/4)",
		"-F, --CPU-freq               accepted for compatibility (ibgo reads the monotonic clock)",
		"-i, --ib-port=PORT           device port (default 1)",
		"-m, --mtu=BYTES              256..4096 (default: the port's active MTU)",
		"-n, --iters=N                iterations (default 5000 for write_bw, else 1000)",
		"-p, --port=PORT              TCP port of the out-of-band exchange (default 18515)",
		"-s, --size=BYTES[K|M]        message size",
		"-S, --sl=SL                  service level",
		"-u, --qp-timeout=N           4.096 us * 2^N (default 14)",
		"-x, --gid-index=N            GID index (default on RoCE: the IPv4-mapped RoCE v2 GID)",
		"    --ipv6                   prefer an IPv6 GID",
		"    --output=bandwidth|message_rate|latency  print one number",
		"    --json                   one JSON record per size instead of the table",
		"    --out_json[_file=F]      also write the records to F (default perftest_out.json)",
		"    --connect_timeout=SECS   client: keep retrying the server this long (default 10)",
		"    --cpu_util               CPU utilisation column (with -D)",
		"-V, --version                perftest protocol version ibgo speaks",
	}
	if t.Kind == BW {
		lines = append(lines,
			"-b, --bidirectional          both directions, reported as the sum",
			"-l, --post_list=N            post N work requests per call",
			"-N, --noPeak                 skip the peak bandwidth computation",
			"-q, --qp=N                   number of QPs",
			"-Q, --cq-mod=N               a completion every N work requests",
			"-t, --tx-depth=N             send queue depth (default 128)",
			"-w, --limit_bw=X / -y, --limit_msgrate=X  fail below these",
			"    --report_gbits           Gb/s instead of MB/s",
			"    --report-both            with -b, local and remote lines too",
			"    --run_infinitely         report every -D seconds until killed",
			"    --perform_warm_up        one tx-depth burst before measuring",
		)
	} else {
		lines = append(lines,
			"-C, --report-cycles          times in clock units (nanoseconds)",
			"-H, --report-histogrm        print every sorted sample",
			"-U, --report-unsorted        print every sample, unsorted",
			"    --latency_gap=NS         wait between posts",
		)
	}
	if t.Verb == Send {
		lines = append(lines, "-r, --rx-depth=N             receive queue depth (default 512)", "-I, --inline_size=N          max inline data")
	}
	if t.Verb == Write {
		lines = append(lines, "-I, --inline_size=N          max inline data")
	}
	if t.Verb == Read || t.Verb == Atomic {
		lines = append(lines, "-o, --outs=N                 outstanding reads/atomics (default: the device maximum)")
	}
	if t.Verb == Atomic {
		lines = append(lines, "-A, --atomic_type=FETCH_AND_ADD|CMP_AND_SWAP")
	}
	for _, l := range lines {
		b.WriteString("  " + l + "\n")
	}
	b.WriteString("\nRefused (with a message): -R, -z, -O, -e, -g, -W, XRC/DC/SRD, GPU memory, rate limiter.\n")
	return b.String()
}
