package perftest

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/ibgo/ibgo/uverbs"
)

// ParseError is a command line perftest refuses; Msg is printed as
// perftest prints it (PrintError). A plain value.
type ParseError struct {
	Msg       string
	ShowUsage bool
}

func (e *ParseError) Error() string { return e.Msg }

func perr(format string, args ...any) error { return &ParseError{Msg: fmt.Sprintf(format, args...)} }

// -h and -V are not Config: their setters say so with these.
var (
	errHelp    = &ParseError{Msg: "help"}
	errVersion = &ParseError{Msg: "version"}
)

// Command is a parsed perftest command line (a plain value).
type Command struct {
	Config           // validated and derived: Run it as it is
	Help    bool     // -h: print Usage instead
	Version bool     // -V: print the protocol version instead
	Notices []string // what perftest prints on stdout while it parses, in order
}

type opt struct {
	short  byte
	long   string
	hasArg bool
	set    func(p *Config, v string) error
}

func intArg(name string, dst *int) func(*Config, string) error {
	return func(p *Config, v string) error {
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
	"O":                "dual-port mode (-O/--dualport) is not supported",
	"W":                "performance counters (-W/--report-counters) are not supported",
	"L":                "hop limit (-L/--hop_limit) applies to raw Ethernet QPs, which ibgo does not offer",
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
}

func options() []opt {
	var o []opt
	add := func(short byte, long string, hasArg bool, set func(*Config, string) error) {
		o = append(o, opt{short, long, hasArg, set})
	}
	flag := func(f func(p *Config)) func(*Config, string) error {
		return func(p *Config, _ string) error { f(p); return nil }
	}
	add('p', "port", true, func(p *Config, v string) error { return intArg("Port", &p.Port)(p, v) })
	add('d', "ib-dev", true, func(p *Config, v string) error { p.Dev = v; return nil })
	add('i', "ib-port", true, func(p *Config, v string) error { return intArg("IB Port", &p.IBPort)(p, v) })
	add('m', "mtu", true, func(p *Config, v string) error { return intArg("MTU", &p.MTU)(p, v) })
	add('n', "iters", true, func(p *Config, v string) error { return intArg("Iterations", &p.Iters)(p, v) })
	add('t', "tx-depth", true, func(p *Config, v string) error { return intArg("TX depth", &p.TxDepth)(p, v) })
	add('r', "rx-depth", true, func(p *Config, v string) error { p.RxGiven = true; return intArg("RX depth", &p.RxDepth)(p, v) })
	add('u', "qp-timeout", true, func(p *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 255 {
			return perr(" QP Timeout argument %s should be uint8_t", v)
		}
		p.QPTimeout = n
		return nil
	})
	add('S', "sl", true, func(p *Config, v string) error { return intArg("SL", &p.SL)(p, v) })
	add('x', "gid-index", true, func(p *Config, v string) error { p.GIDGiven = true; return intArg("GID index", &p.GIDIndex)(p, v) })
	add('c', "connection", true, func(p *Config, v string) error {
		for i, n := range connNames {
			if strings.EqualFold(v, n) {
				p.Conn = Conn(i)
				return nil
			}
		}
		return perr(" Invalid Connection type. Please choose from {RC,UC,UD,XRC,DC,SRD}")
	})
	add('s', "size", true, func(p *Config, v string) error {
		n, err := sizeArg(v)
		if err != nil {
			return perr(" Message Size should be between 1 and 2147483647")
		}
		p.Size, p.SizeGiven = n, true
		return nil
	})
	add('a', "all", false, flag(func(p *Config) { p.All = true }))
	add('D', "duration", true, func(p *Config, v string) error { return intArg("Duration", &p.Duration)(p, v) })
	add('f', "margin", true, func(p *Config, v string) error { p.MarginGiven = true; return intArg("Margin", &p.Margin)(p, v) })
	add('b', "bidirectional", false, flag(func(p *Config) { p.Bidir = true }))
	add('q', "qp", true, func(p *Config, v string) error { return intArg("Number of QPs", &p.NumQPs)(p, v) })
	add('I', "inline_size", true, func(p *Config, v string) error { return intArg("Inline size", &p.Inline)(p, v) })
	add('Q', "cq-mod", true, func(p *Config, v string) error { p.CQModGiven = true; return intArg("CQ moderation", &p.CQMod)(p, v) })
	add('l', "post_list", true, func(p *Config, v string) error { return intArg("Post list", &p.PostList)(p, v) })
	add(0, "recv_post_list", true, func(p *Config, v string) error { return intArg("Receive post list", &p.RecvPostLst)(p, v) })
	add('F', "CPU-freq", false, flag(func(p *Config) { p.CPUFreqF = true }))
	add('N', "noPeak", false, flag(func(p *Config) { p.NoPeak = true }))
	add('C', "report-cycles", false, flag(func(p *Config) { p.Cycles = true }))
	add('H', "report-histogrm", false, flag(func(p *Config) { p.Histogram = true }))
	add('U', "report-unsorted", false, flag(func(p *Config) { p.Unsorted = true }))
	add('o', "outs", true, func(p *Config, v string) error { return intArg("Outstanding reads", &p.OutReads)(p, v) })
	add('A', "atomic_type", true, func(p *Config, v string) error {
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
	add('w', "limit_bw", true, func(p *Config, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return perr(" Invalid BW limit %s", v)
		}
		p.LimitBW = f
		return nil
	})
	add('y', "limit_msgrate", true, func(p *Config, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return perr(" Invalid message rate limit %s", v)
		}
		p.LimitMR = f
		return nil
	})
	add('e', "events", false, func(p *Config, _ string) error {
		if p.Test.Verb == Write {
			return perr(" Events feature not available on WRITE verb")
		}
		p.Events = true
		return nil
	})
	add('X', "vector", true, func(p *Config, v string) error {
		if p.Test.Verb == Write {
			return perr(" Events feature not available on WRITE verb")
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < minEQNum || n > maxEQNum {
			return perr(" EQN should be between %d and %d", minEQNum, maxEQNum)
		}
		p.CompVector, p.VectorGiven = n, true
		return nil
	})
	add('g', "mcg", false, func(p *Config, _ string) error {
		if p.Test.Verb != Send {
			return perr(" MultiCast feature only available on SEND verb")
		}
		p.Mcast = true
		return nil
	})
	add('M', "MGID", true, func(p *Config, v string) error {
		g, err := parseMGID(v)
		if err != nil {
			return err
		}
		p.MGID, p.MGIDGiven = g, true
		return nil
	})
	add('z', "comm_rdma_cm", false, flag(func(p *Config) { p.CommCM = true }))
	add('R', "rdma_cm", false, flag(func(p *Config) { p.CommCM, p.WorkCM = true, true }))
	add('T', "tos", true, func(p *Config, v string) error {
		if err := intArg("TOS", &p.TOS)(p, v); err != nil {
			return err
		}
		if p.TOS < 0 || p.TOS > 255 {
			return perr(" TOS should be between 0 and 255")
		}
		return nil
	})
	add(0, "retry_count", true, func(p *Config, v string) error {
		if err := intArg("Retry Count", &p.RetryCount)(p, v); err != nil {
			return err
		}
		if p.RetryCount < 0 {
			return perr(" Retry Count must be non-negative")
		}
		return nil
	})
	add('h', "help", false, func(p *Config, _ string) error { return errHelp })
	add('V', "version", false, func(p *Config, _ string) error { return errVersion })
	add(0, "report_gbits", false, flag(func(p *Config) { p.ReportGbits = true }))
	add(0, "run_infinitely", false, flag(func(p *Config) { p.RunInf = true }))
	add(0, "perform_warm_up", false, flag(func(p *Config) { p.WarmUp = true }))
	add(0, "cpu_util", false, flag(func(p *Config) { p.CPUUtil = true }))
	add(0, "report-both", false, flag(func(p *Config) { p.ReportBoth = true }))
	add(0, "ipv6", false, flag(func(p *Config) { p.IPv6 = true }))
	add(0, "use_hugepages", false, flag(func(p *Config) { p.HugePages = true }))
	add(0, "use-srq", false, flag(func(p *Config) { p.UseSRQ = true }))
	add(0, "use_old_post_send", false, flag(func(p *Config) {}))
	add(0, "disable_pcie_relaxed", false, flag(func(p *Config) {}))
	add(0, "dont_xchg_versions", false, flag(func(p *Config) { p.DontXchg = true }))
	add(0, "tclass", true, func(p *Config, v string) error { return intArg("Traffic class", &p.TClass)(p, v) })
	add(0, "pkey_index", true, func(p *Config, v string) error { return intArg("Pkey index", &p.PkeyIndex)(p, v) })
	add(0, "latency_gap", true, func(p *Config, v string) error { return intArg("Latency gap", &p.LatencyGap)(p, v) })
	add(0, "output", true, func(p *Config, v string) error {
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
	add(0, "out_json", false, flag(func(p *Config) {
		if p.JSONFile == "" {
			p.JSONFile = "perftest_out.json"
		}
	}))
	add(0, "out_json_file", true, func(p *Config, v string) error { p.JSONFile = v; return nil })
	add(0, "json", false, flag(func(p *Config) { p.JSON = true }))
	add(0, "connect_timeout", true, func(p *Config, v string) error { return intArg("Connect timeout", &p.ConnectFor)(p, v) })
	return o
}

// ParseArgs reads a perftest command line (args without the program name)
// for test t, with perftest's flags, defaults, rules and messages (a
// *ParseError). prog names the program in messages.
func ParseArgs(t Test, prog string, args []string) (*Command, error) {
	cmd := &Command{Config: *defaults(t)}
	p := &cmd.Config
	apply := func(o opt, v string) error {
		switch err := o.set(p, v); err {
		case errHelp:
			cmd.Help = true
		case errVersion:
			cmd.Version = true
		default:
			return err
		}
		return nil
	}
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
			if err := apply(o, val); err != nil {
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
					if err := apply(o, ""); err != nil {
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
				if err := apply(o, val); err != nil {
					return nil, err
				}
				break
			}
		default:
			positional = append(positional, a)
		}
	}
	if cmd.Help || cmd.Version {
		return cmd, nil
	}
	switch len(positional) {
	case 0:
	case 1:
		p.Server = positional[0]
	default:
		return nil, perr(" Invalid Command line. Please check command rerun ")
	}
	notices, err := p.prepare()
	if err != nil {
		return nil, err
	}
	cmd.Notices = notices
	return cmd, nil
}

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
		"-F, --CPU-freq               accepted for compatibility: ibgo reads the CPU cycle counter\n" +
			"                               (RDTSC, CNTVCT_EL0) scaled against CLOCK_MONOTONIC, so there is no\n" +
			"                               CPU frequency to check (IBGO_PERF_CLOCK=monotonic: that clock only)",
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
		"-z, --comm_rdma_cm           exchange over an rdma_cm connection instead of TCP",
		"-R, --rdma_cm                connect the test QPs with rdma_cm too (RC or UD)",
		"-T, --tos=N                  type of service of the -R connections (0-255)",
		"    --retry_count=N          retry and RNR retry counts of the -R connections (default 7)",
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
	if t.Verb == Send {
		lines = append(lines, "-g, --mcg                    send to a multicast group (UD, one QP)",
			"-M, --MGID=B:B:...:B         the group's GID, 16 bytes (with -g)")
	}
	if t.Verb != Write {
		lines = append(lines, "-e, --events                 sleep on CQ events instead of polling",
			"-X, --vector=N               the CQs' completion vector (with -e)")
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
	b.WriteString("\nRefused (with a message): -O, -W, XRC/DC/SRD, GPU memory, rate limiter.\n")
	return b.String()
}

// parseMGID reads -M as perftest's set_multicast_gid does: 16 numbers
// separated by ':', each in C's strtoll base-0 forms (decimal, 0x hex,
// 0 octal), each a byte. perftest reads past the string when there are
// fewer than 16; ibgo says so.
func parseMGID(v string) (uverbs.GID, error) {
	var g uverbs.GID
	parts := strings.Split(v, ":")
	if len(parts) != 16 {
		return g, perr(" MGID %q: want 16 numbers separated by ':' (perftest's form, e.g. 255:1:0:0:0:2:201:133:0:0:0:0:0:0:0:0), got %d", v, len(parts))
	}
	for i, s := range parts {
		n, err := strconv.ParseInt(s, 0, 64)
		if err != nil || n < 0 || n > 255 {
			return g, perr(" MGID %q: byte %d (%q) is not a number from 0 to 255", v, i, s)
		}
		g[i] = byte(n)
	}
	return g, nil
}
