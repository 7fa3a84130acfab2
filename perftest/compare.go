package perftest

// Compare: sockets against verbs on one link, the three measurements of
// the IPoIB-against-verbs comparison (bandwidth, the CPU each side spends,
// latency), measured the same way over a TCP socket and over verbs, in
// one invocation pair like perftest's (a server, and a client that names
// it). qperf's tcp_bw/tcp_lat beside rc_bw/rc_lat is what people use for
// this today.
//
// The client drives. Over a TCP control connection (Port) it names each
// test in turn; the server prepares its side, answers ready, runs it, and
// reports what it measured. The tests:
//
//   - tcp_bw: the client writes Size-byte buffers on a TCP connection
//     (Port+1) for Duration; bandwidth is the bytes the server read over
//     the time from its first byte to the end of the stream.
//   - tcp_lat: LatSize-byte messages echoed by the server, LatIters times
//     after a warm-up; latency is half the round trip (as perftest and
//     qperf report it).
//   - rc_bw: perftest's write_bw (or send_bw with Verbs "send"; over UD,
//     shown as ud_bw, with Verbs "ud") for Duration (Port+2).
//   - rc_lat: perftest's send_lat, LatIters of LatSize bytes (Port+3).
//
// CPU is each process's own user+system time over its part of the test
// (getrusage), as a share of one core of the test's wall time. Work the
// kernel does outside the process (softirq, soft-RoCE's tasklets and
// workqueues, the TCP stack's receive processing in softirq) is charged
// to no process and is not in it: on soft-RoCE the placing of RDMA data is
// kernel work, on a ConnectX it is the HCA's. HostCPU is the whole
// machine's busy time over the same interval (/proc/stat), which includes
// it.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ibgo/ibgo/internal/sys"
)

// CompareConfig is one side of a comparison.
type CompareConfig struct {
	Server   string        // the server's host; "" makes this side the server
	Port     int           // control port; the tests use Port+1..Port+3
	Dev      string        // RDMA device ("" the first)
	GIDIndex int           // -1: perftest's choice
	Size     int           // bandwidth tests' message size
	Duration time.Duration // each bandwidth test's length (whole seconds for rc_bw, at least 1)
	LatSize  int           // latency tests' message size
	LatIters int           // latency round trips measured
	Verbs    string        // "write" (default), "send", or "ud" (send_bw over UD: Size at most the port's MTU): the verbs bandwidth test's operation
	Stdout   io.Writer     // progress lines (nil: none)
}

// DefaultCompareConfig is the comparison's defaults.
func DefaultCompareConfig() CompareConfig {
	return CompareConfig{Port: 18700, GIDIndex: -1, Size: 65536, Duration: 2 * time.Second, LatSize: 64, LatIters: 2000, Verbs: "write"}
}

// CompareRow is one test's figures, from the client's view with the
// server's CPU.
type CompareRow struct {
	Test       string  `json:"test"`
	Size       int     `json:"size_bytes"`
	Gbps       float64 `json:"bandwidth_gbps,omitempty"`
	MsgRate    float64 `json:"msg_rate_per_s,omitempty"`
	LatP50us   float64 `json:"latency_p50_us,omitempty"`
	LatP99us   float64 `json:"latency_p99_us,omitempty"`
	ClientCPU  float64 `json:"client_cpu_share"` // of one core
	ServerCPU  float64 `json:"server_cpu_share"`
	ClientHost float64 `json:"client_host_cpu_share"` // the whole machine, in cores
	ServerHost float64 `json:"server_host_cpu_share"`
	// ServerCPUPerGB is the server process's CPU seconds per GB moved
	// (bandwidth tests)
	ServerCPUPerGB float64 `json:"server_cpu_s_per_gb,omitempty"`
	ClientCPUPerGB float64 `json:"client_cpu_s_per_gb,omitempty"`
}

// CompareTests are the tests in the order they run.
var CompareTests = []string{"tcp_bw", "tcp_lat", "rc_bw", "rc_lat"}

// compareMsg is one control message.
type compareMsg struct {
	Test string `json:"test,omitempty"`
	// the client's parameters, which the server takes (as perftest's
	// server takes the client's)
	Size     int    `json:"size,omitempty"`
	Duration int64  `json:"duration_ns,omitempty"`
	LatSize  int    `json:"lat_size,omitempty"`
	LatIters int    `json:"lat_iters,omitempty"`
	Verbs    string `json:"verbs,omitempty"`

	Ready  bool   `json:"ready,omitempty"`
	Bytes  int64  `json:"bytes,omitempty"`
	WallNs int64  `json:"wall_ns,omitempty"`
	CPUNs  int64  `json:"cpu_ns,omitempty"`
	HostNs int64  `json:"host_ns,omitempty"`
	Err    string `json:"err,omitempty"`
}

// usage is a process's CPU time and the host's busy time at one moment.
type usage struct{ wall, cpu, host int64 }

func now() usage {
	cpu, _ := sys.ProcessCPUTime()
	return usage{wall: time.Now().UnixNano(), cpu: int64(cpu), host: hostBusy()}
}

// hostBusy is the machine's busy CPU time (/proc/stat: every state but
// idle and iowait), in nanoseconds; 0 when unreadable.
func hostBusy() int64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var busy int64
	for i, s := range f[1:] {
		v, _ := strconv.ParseInt(s, 10, 64)
		if i != 3 && i != 4 && i < 8 { // idle, iowait; guest times are in user
			busy += v
		}
	}
	return busy * int64(time.Second) / 100 // USER_HZ
}

func (a usage) to(b usage) (wall, cpu, host int64) {
	return b.wall - a.wall, b.cpu - a.cpu, b.host - a.host
}

// Compare runs one side. The client returns the rows; the server serves
// one client and returns nil rows.
func Compare(ctx context.Context, cfg CompareConfig) ([]CompareRow, error) {
	if cfg.Size <= 0 || cfg.LatSize <= 0 || cfg.LatIters <= 0 || cfg.Duration < time.Second {
		return nil, fmt.Errorf("perf compare: size, latency size and iterations must be positive and the duration at least 1s")
	}
	if cfg.Verbs != "write" && cfg.Verbs != "send" && cfg.Verbs != "ud" {
		return nil, fmt.Errorf("perf compare: verbs %q: write, send or ud", cfg.Verbs)
	}
	if cfg.Server == "" {
		return nil, compareServer(ctx, cfg)
	}
	return compareClient(ctx, cfg)
}

func (cfg CompareConfig) say(format string, a ...any) {
	if cfg.Stdout != nil {
		fmt.Fprintf(cfg.Stdout, format+"\n", a...)
	}
}

func (cfg CompareConfig) rcConfig(test string, server bool) Config {
	t := Test{Verb: Write, Kind: BW}
	if cfg.Verbs != "write" {
		t.Verb = Send
	}
	if test == "rc_lat" {
		t = Test{Verb: Send, Kind: LAT}
	}
	p := DefaultConfig(t)
	if test == "rc_bw" && cfg.Verbs == "ud" {
		p.Conn = UD
	}
	p.Dev = cfg.Dev
	if cfg.GIDIndex >= 0 {
		p.GIDIndex, p.GIDGiven = cfg.GIDIndex, true
	}
	p.ReportGbits = true
	if test == "rc_bw" {
		p.Port = cfg.Port + 2
		p.Size, p.SizeGiven = cfg.Size, true
		p.Duration = int(cfg.Duration / time.Second)
	} else {
		p.Port = cfg.Port + 3
		p.Size, p.SizeGiven = cfg.LatSize, true
		p.Iters = cfg.LatIters
	}
	if !server {
		p.Server = cfg.Server
	}
	return p
}

func compareServer(ctx context.Context, cfg CompareConfig) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort("", strconv.Itoa(cfg.Port)))
	if err != nil {
		return fmt.Errorf("perf compare: listen on control port %d: %w", cfg.Port, err)
	}
	cfg.say("perf compare: server waiting on port %d", cfg.Port)
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	c, err := ln.Accept()
	stop()
	ln.Close()
	if err != nil {
		return fmt.Errorf("perf compare: accept the control connection: %w", errors.Join(ctx.Err(), err))
	}
	defer c.Close()
	dec, enc := json.NewDecoder(bufio.NewReader(c)), json.NewEncoder(c)
	for {
		var m compareMsg
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil // the client is done
			}
			return fmt.Errorf("perf compare: control connection: %w", err)
		}
		if m.Size > 0 && m.LatSize > 0 && m.LatIters > 0 && m.Duration >= int64(time.Second) && (m.Verbs == "write" || m.Verbs == "send" || m.Verbs == "ud") {
			cfg.Size, cfg.Duration, cfg.LatSize, cfg.LatIters, cfg.Verbs = m.Size, time.Duration(m.Duration), m.LatSize, m.LatIters, m.Verbs
		}
		res, err := serveOne(ctx, cfg, m.Test, func() error { return enc.Encode(compareMsg{Ready: true}) })
		if err != nil {
			res.Err = err.Error()
		}
		if err := enc.Encode(res); err != nil {
			return fmt.Errorf("perf compare: control connection: %w", err)
		}
		if res.Err != "" {
			return fmt.Errorf("perf compare: %s: %s", m.Test, res.Err)
		}
	}
}

// serveOne runs the server's side of test; ready tells the client it may
// start.
func serveOne(ctx context.Context, cfg CompareConfig, test string, ready func() error) (compareMsg, error) {
	var res compareMsg
	switch test {
	case "tcp_bw", "tcp_lat":
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort("", strconv.Itoa(cfg.Port+1)))
		if err != nil {
			return res, err
		}
		defer ln.Close()
		if err := ready(); err != nil {
			return res, err
		}
		stop := context.AfterFunc(ctx, func() { ln.Close() })
		defer stop()
		c, err := ln.Accept()
		if err != nil {
			return res, err
		}
		defer c.Close()
		start := now()
		if test == "tcp_bw" {
			buf := make([]byte, 1<<20)
			first := false
			for {
				n, err := c.Read(buf)
				if n > 0 && !first {
					first, start = true, now()
				}
				res.Bytes += int64(n)
				if err != nil {
					if !errors.Is(err, io.EOF) {
						return res, err
					}
					break
				}
			}
		} else {
			buf := make([]byte, cfg.LatSize)
			for {
				if _, err := io.ReadFull(c, buf); err != nil {
					if !errors.Is(err, io.EOF) {
						return res, err
					}
					break
				}
				if _, err := c.Write(buf); err != nil {
					return res, err
				}
			}
		}
		res.WallNs, res.CPUNs, res.HostNs = start.to(now())
		return res, nil
	case "rc_bw", "rc_lat":
		if err := ready(); err != nil {
			return res, err
		}
		start := now()
		_, err := Run(ctx, cfg.rcConfig(test, true))
		res.WallNs, res.CPUNs, res.HostNs = start.to(now())
		return res, err
	}
	return res, fmt.Errorf("unknown test %q", test)
}

func compareClient(ctx context.Context, cfg CompareConfig) ([]CompareRow, error) {
	c, err := dialOOB(ctx, cfg.Server, cfg.Port, time.Duration(defConnectFor)*time.Second)
	if err != nil {
		return nil, fmt.Errorf("perf compare: %w", err)
	}
	defer c.c.Close()
	dec, enc := json.NewDecoder(bufio.NewReader(c.c)), json.NewEncoder(c.c)
	var rows []CompareRow
	for _, test := range CompareTests {
		req := compareMsg{Test: test, Size: cfg.Size, Duration: int64(cfg.Duration), LatSize: cfg.LatSize, LatIters: cfg.LatIters, Verbs: cfg.Verbs}
		if err := enc.Encode(req); err != nil {
			return rows, fmt.Errorf("perf compare: control connection: %w", err)
		}
		var m compareMsg
		if err := dec.Decode(&m); err != nil || !m.Ready {
			return rows, fmt.Errorf("perf compare: %s: the server is not ready: %v %s", test, err, m.Err)
		}
		cfg.say("perf compare: %s", test)
		row, err := clientOne(ctx, cfg, test)
		if err != nil {
			return rows, fmt.Errorf("perf compare: %s: %w", test, err)
		}
		if err := dec.Decode(&m); err != nil {
			return rows, fmt.Errorf("perf compare: %s: the server's result: %w", test, err)
		}
		if m.Err != "" {
			return rows, fmt.Errorf("perf compare: %s: the server: %s", test, m.Err)
		}
		if m.WallNs > 0 {
			row.ServerCPU = float64(m.CPUNs) / float64(m.WallNs)
			row.ServerHost = float64(m.HostNs) / float64(m.WallNs)
		}
		if test == "tcp_bw" && m.WallNs > 0 {
			row.Gbps = float64(m.Bytes) * 8 / float64(m.WallNs)
			row.MsgRate = row.Gbps * 1e9 / 8 / float64(cfg.Size)
		}
		if row.Gbps > 0 {
			gbPerS := row.Gbps / 8
			row.ServerCPUPerGB = row.ServerCPU / gbPerS
			row.ClientCPUPerGB = row.ClientCPU / gbPerS
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// clientOne runs the client's side of test and fills what it measures.
func clientOne(ctx context.Context, cfg CompareConfig, test string) (CompareRow, error) {
	row := CompareRow{Test: test, Size: cfg.Size}
	switch test {
	case "tcp_bw", "tcp_lat":
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(cfg.Server, strconv.Itoa(cfg.Port+1)))
		if err != nil {
			return row, err
		}
		defer conn.Close()
		start := now()
		if test == "tcp_bw" {
			buf := make([]byte, cfg.Size)
			end := time.Now().Add(cfg.Duration)
			for time.Now().Before(end) {
				if _, err := conn.Write(buf); err != nil {
					return row, err
				}
			}
			if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
				return row, err
			}
			_, _ = io.Copy(io.Discard, conn) // the server closes once it has read everything
		} else {
			row.Size = cfg.LatSize
			buf := make([]byte, cfg.LatSize)
			warm := cfg.LatIters / 10
			rtts := make([]time.Duration, 0, cfg.LatIters)
			for i := 0; i < warm+cfg.LatIters; i++ {
				t0 := time.Now()
				if _, err := conn.Write(buf); err != nil {
					return row, err
				}
				if _, err := io.ReadFull(conn, buf); err != nil {
					return row, err
				}
				if i >= warm {
					rtts = append(rtts, time.Since(t0))
				}
			}
			slices.Sort(rtts)
			half := func(q float64) float64 { return float64(rtts[int(q*float64(len(rtts)-1))]) / 2 / 1e3 }
			row.LatP50us, row.LatP99us = half(0.5), half(0.99)
			row.MsgRate = float64(warm+len(rtts)) / time.Since(time.Unix(0, start.wall)).Seconds() // round trips, warm-up included
			_ = conn.(*net.TCPConn).CloseWrite()
			_, _ = io.Copy(io.Discard, conn)
		}
		wall, cpu, host := start.to(now())
		row.ClientCPU, row.ClientHost = float64(cpu)/float64(wall), float64(host)/float64(wall)
		return row, nil
	case "rc_bw", "rc_lat":
		start := now()
		res, err := Run(ctx, cfg.rcConfig(test, false))
		wall, cpu, host := start.to(now())
		if err != nil {
			return row, err
		}
		row.ClientCPU, row.ClientHost = float64(cpu)/float64(wall), float64(host)/float64(wall)
		if len(res.Records) == 0 {
			return row, errors.New("perftest returned no result")
		}
		r := res.Records[0]
		row.Size = r.Size
		if test == "rc_bw" && cfg.Verbs == "ud" {
			row.Test = "ud_bw"
		}
		if r.BWAverage != nil {
			row.Gbps = *r.BWAverage
		}
		if r.MsgRate != nil {
			row.MsgRate = *r.MsgRate * 1e6
		}
		if test == "rc_lat" {
			row.LatP50us, row.LatP99us = r.Lat["t_typical"], r.Lat["p99"]
			if r.Lat["t_avg"] > 0 {
				row.MsgRate = 1e6 / (2 * r.Lat["t_avg"])
			}
		}
		return row, nil
	}
	return row, fmt.Errorf("unknown test %q", test)
}

// WriteCompareTable prints rows as perf compare's table.
func WriteCompareTable(w io.Writer, rows []CompareRow) {
	fmt.Fprintf(w, "%-8s %8s %9s %11s %11s %11s %12s %12s %11s %11s\n",
		"test", "bytes", "Gb/s", "msg/s", "lat p50 µs", "lat p99 µs", "client CPU", "server CPU", "client s/GB", "server s/GB")
	num := func(v float64, prec int) string {
		if v == 0 {
			return "-"
		}
		return strconv.FormatFloat(v, 'f', prec, 64)
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%-8s %8d %9s %11s %11s %11s %11.0f%% %11.0f%% %11s %11s\n", r.Test, r.Size, num(r.Gbps, 2), num(r.MsgRate, 0),
			num(r.LatP50us, 2), num(r.LatP99us, 2), 100*r.ClientCPU, 100*r.ServerCPU, num(r.ClientCPUPerGB, 3), num(r.ServerCPUPerGB, 3))
	}
	fmt.Fprintln(w, "CPU: the process's user+system time as a share of one core over the test (kernel work outside")
	fmt.Fprintln(w, "the process, e.g. soft-RoCE's or the TCP stack's softirq, is not in it; the JSON output's host")
	fmt.Fprintln(w, "shares include it); latency is half the round trip, as perftest and qperf report it.")
}
