package perftest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/ibgo/ibgo/uverbs"
)

// Output layout of perftest 4.5 (perftest_parameters.h, .c), which scripts
// parse: the result line, headers and row formats are kept to the byte.
const (
	resultLine     = "---------------------------------------------------------------------------------------\n"
	resultFmt      = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"
	resultFmtG     = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
	resultFmtLat   = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
	resultFmtLatD  = " #bytes        #iterations       t_avg[usec]    tps average"
	resultExt      = "\n"
	resultExtCPU   = "    CPU_Util[%]\n"
	reportFmt      = " %-7d    %-10d       %-7.2f            %-7.2f\t\t   %-7.6f"
	reportFmtExt   = " %-7d    %d           %-7.6f            %-7.6f            %-7.6f"
	reportFmtLat   = " %-7d %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f"
	reportFmtLatD  = " %-7d       %d            %-7.2f        %-7.2f"
	reportExtCPU   = "\t    %-3.2f\n"
	mbFactor       = 0x100000
	gbFactor       = 125000000
	nsPerSec       = 1e9
	nsPerUsec      = 1e3
	latMeasureTail = 2
)

// printer is where a run's output goes, and what it printed: the records
// (Result) and whether a limit (-w, -y) was missed.
type printer struct {
	out, errw  io.Writer
	records    []Record
	belowLimit bool
}

func newPrinter(out, errw io.Writer) printer {
	if out == nil {
		out = io.Discard
	}
	if errw == nil {
		errw = io.Discard
	}
	return printer{out: out, errw: errw}
}

func (p *printer) print(s string)               { fmt.Fprint(p.out, s) }
func (p *printer) printf(f string, args ...any) { fmt.Fprintf(p.out, f, args...) }
func (p *printer) warnf(f string, args ...any)  { fmt.Fprintf(p.errw, f, args...) }

// cHex formats like C's %#0Nx: zero padding to width N overall, "0x"
// included in the width (unlike Go's %#0Nx), and for zero no "0x" at all
// (the C # flag's rule).
func cHex(v uint64, width int) string {
	if v == 0 {
		return fmt.Sprintf("%0*x", width, 0)
	}
	return "0x" + fmt.Sprintf("%0*x", max(width-2, 0), v)
}

func (e *engine) banner() {
	p := e.cfg
	if p.Output != OutputFull || p.JSON {
		return
	}
	w := e.pr.out
	fmt.Fprint(w, resultLine)
	title := "                    " + p.Test.Verb.title() + " "
	if p.Test.Verb == Atomic {
		title += map[bool]string{false: "FETCH_AND_ADD", true: "CMP_AND_SWAP"}[p.AtomicCAS] + " "
	}
	if p.Test.Kind == BW {
		if p.Bidir {
			title += "Bidirectional "
		}
		if p.PostList > 1 {
			title += "Post List "
		}
		title += "BW "
	} else {
		title += "Latency "
	}
	if p.Mcast {
		title += "Multicast "
	}
	fmt.Fprintln(w, title+"Test")
	if p.Events {
		fmt.Fprintf(w, " Test with events. Using %s_comp%d\n", e.hw.dev.Name, p.CompVector)
	}
	if p.Mcast {
		fmt.Fprintln(w, " MultiCast runs on UD!")
	}
	fmt.Fprintf(w, " Dual-port       : OFF\t\tDevice         : %s\n", e.hw.dev.Name)
	transport := "IB"
	if e.hw.dev.Transport() == uverbs.TransportIWARP {
		transport = "IW"
	}
	fmt.Fprintf(w, " Number of qps   : %d\t\tTransport type : %s\n", p.NumQPs, transport)
	fmt.Fprintf(w, " Connection type : %s\t\tUsing SRQ      : %s\n", p.Conn, onOff(p.UseSRQ))
	fmt.Fprintf(w, " PCIe relax order: %s\n", onOff(e.relaxedOrdering()))
	fmt.Fprintf(w, " ibv_wr* API     : OFF\n")
	if p.Server != "" || p.Bidir {
		fmt.Fprintf(w, " TX depth        : %d\n", p.TxDepth)
	}
	if p.PostList > 1 {
		fmt.Fprintf(w, " Post List       : %d\n", p.PostList)
	}
	if p.Test.Verb == Send && (p.Server == "" || p.Bidir) {
		fmt.Fprintf(w, " RX depth        : %d\n", p.RxDepth)
	}
	if p.Test.Kind == BW {
		fmt.Fprintf(w, " CQ Moderation   : %d\n", p.CQMod)
	}
	fmt.Fprintf(w, " Mtu             : %d[B]\n", e.hw.mtu.Bytes())
	ll := map[uverbs.LinkLayer]string{uverbs.LinkLayerInfiniBand: "IB", uverbs.LinkLayerEthernet: "Ethernet"}[e.hw.linkLayer]
	if ll == "" {
		ll = "Unknown"
	}
	fmt.Fprintf(w, " Link type       : %s\n", ll)
	if p.GIDIndex != -1 {
		fmt.Fprintf(w, " GID index       : %d\n", p.GIDIndex)
	}
	if p.Test.Verb != Read && p.Test.Verb != Atomic {
		fmt.Fprintf(w, " Max inline data : %d[B]\n", p.Inline)
	} else {
		fmt.Fprintf(w, " Outstand reads  : %d\n", e.hw.outReads)
	}
	fmt.Fprintf(w, " rdma_cm QPs\t : %s\n", onOff(p.WorkCM))
	fmt.Fprintf(w, " Data ex. method : %s", map[bool]string{false: "Ethernet", true: "rdma_cm"}[p.CommCM])
	if p.WorkCM && p.TOS >= 0 {
		fmt.Fprintf(w, " \tTOS    : %d", p.TOS)
	}
	if p.WorkCM && p.Server == "" {
		fmt.Fprintf(w, "\n%s Waiting for client rdma_cm QP to connect\n Please run the same command with the IB/RoCE interface IP", resultLine)
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, resultLine)
}

func onOff(b bool) string {
	if b {
		return "ON"
	}
	return "OFF"
}

// printDest mirrors ctx_print_pingpong_data.
func (e *engine) printDest(side string, d Dest) {
	if e.cfg.Output != OutputFull || e.cfg.JSON {
		return
	}
	v := e.cfg.Test.Verb
	if e.cfg.CommCM {
		// The exchange's own parameters print the lines, and over
		// rdma_cm their verb is SEND (create_comm_struct).
		v = Send
	}
	s := fmt.Sprintf(" %s address: LID %s QPN %s PSN %s", side, cHex(uint64(d.LID), 4), cHex(uint64(d.QPN), 6), cHex(uint64(d.PSN), 6))
	if v == Read {
		s += " OUT " + cHex(uint64(d.OutReads), 4)
	}
	if v == Read || v == Write {
		s += " RKey " + cHex(uint64(d.RKey), 8) + " VAddr " + cHex(d.VAddr, 16)
	}
	fmt.Fprintln(e.pr.out, s)
	if mg := e.mgidLabel(side); e.hw.withGID || mg {
		var g []string
		for _, b := range d.GID {
			g = append(g, fmt.Sprintf("%02d", b))
		}
		label := "GID"
		if mg {
			label = "MGID"
		}
		fmt.Fprintf(e.pr.out, " %s: %s\n", label, strings.Join(g, ":"))
	}
}

func (e *engine) bwHeader() {
	p := e.cfg
	if p.Output != OutputFull || p.JSON {
		return
	}
	fmt.Fprint(e.pr.out, resultLine)
	if p.ReportGbits {
		fmt.Fprint(e.pr.out, resultFmtG)
	} else {
		fmt.Fprint(e.pr.out, resultFmt)
	}
	if e.meas.cpu.enabled {
		fmt.Fprint(e.pr.out, resultExtCPU)
	} else {
		fmt.Fprint(e.pr.out, resultExt)
	}
}

func (e *engine) latHeader() {
	p := e.cfg
	if p.Output != OutputFull || p.JSON {
		return
	}
	fmt.Fprint(e.pr.out, resultLine)
	if p.Duration == 0 {
		fmt.Fprint(e.pr.out, resultFmtLat)
	} else {
		fmt.Fprint(e.pr.out, resultFmtLatD)
	}
	if e.meas.cpu.enabled {
		fmt.Fprint(e.pr.out, resultExtCPU)
	} else {
		fmt.Fprint(e.pr.out, resultExt)
	}
}

func (e *engine) resultLine() {
	if e.cfg.Output == OutputFull && !e.cfg.JSON {
		fmt.Fprint(e.pr.out, resultLine)
	}
}

// bwResult mirrors print_report_bw: peak over every (post i, completion j)
// window, average and message rate over the whole run.
func (e *engine) bwResult(size int) bwReport {
	p := e.cfg
	n := e.meas.iters
	nqps := uint64(p.NumQPs)
	if p.Duration == 0 {
		n = uint64(p.Iters) * nqps
	}
	var sum int64
	if p.NoPeak || len(e.meas.tposted) == 0 {
		sum = e.meas.tcompleted[0] - e.meas.tposted[0]
	} else {
		sum = e.meas.tcompleted[n-1] - e.meas.tposted[0]
	}
	factor := float64(mbFactor)
	if p.ReportGbits {
		factor = gbFactor
	}
	r := bwReport{Size: uint64(size), Iters: n}
	if sum <= 0 {
		sum = 1
	}
	r.Avg = float64(size) * float64(n) * nsPerSec / (float64(sum) * factor)
	r.MsgRate = float64(n) * nsPerSec / (float64(sum) * 1e6)
	if !p.NoPeak && n > 0 {
		// Unsigned, as perftest's cycles_t: entries never stamped (only
		// every cq_mod-th completion is) wrap to huge and never win.
		tc, tp := func(j uint64) uint64 { return uint64(e.meas.tcompleted[j]) }, func(i uint64) uint64 { return uint64(e.meas.tposted[i]) }
		opt := tc(0) - tp(0)
		cqMod := uint64(p.CQMod)
		step := uint64(p.PostList)
		for i := uint64(0); i < n; i += step {
			for j := roundUp(i+1, cqMod) - 1; j < n; j += cqMod {
				if t := (tc(j) - tp(i)) / (j - i + 1); t < opt {
					opt = t
				}
			}
			if n%cqMod != 0 {
				j := n - 1
				if t := (tc(j) - tp(i)) / (j - i + 1); t < opt {
					opt = t
				}
			}
		}
		if opt > 0 {
			// integer "cycles" as perftest computes it
			r.Peak = float64(uint64(size)*uint64(nsPerSec)) / float64(opt*uint64(factor))
		}
	}
	return r
}

func roundUp(v, a uint64) uint64 {
	if v%a == 0 {
		return v
	}
	return (v/a + 1) * a
}

// printBW mirrors print_full_bw_report for one line (rem adds the remote
// side's numbers, as -b reports).
func (e *engine) printBW(my bwReport, rem *bwReport) {
	p := e.cfg
	r := my
	if rem != nil {
		r.Peak += rem.Peak
		r.Avg += rem.Avg
		r.MsgRate += rem.MsgRate
	}
	e.pr.records = append(e.pr.records, e.bwRecord(r))
	switch {
	case p.JSON:
		e.emitJSON(e.pr.records[len(e.pr.records)-1])
	case p.Output == OutputBW:
		fmt.Fprintf(e.pr.out, "%f\n", r.Avg)
	case p.Output == OutputMsgRate:
		fmt.Fprintf(e.pr.out, "%f\n", r.MsgRate)
	default:
		if p.ReportGbits && r.Avg < 0.1 {
			fmt.Fprintf(e.pr.out, reportFmtExt, r.Size, r.Iters, r.Peak, r.Avg, r.MsgRate)
		} else {
			fmt.Fprintf(e.pr.out, reportFmt, r.Size, r.Iters, r.Peak, r.Avg, r.MsgRate)
		}
		if e.meas.cpu.enabled {
			fmt.Fprintf(e.pr.out, reportExtCPU, e.meas.cpu.util())
		} else {
			fmt.Fprint(e.pr.out, "\n")
		}
	}
	if (p.LimitBW > 0 && r.Avg < p.LimitBW) || (p.LimitMR > 0 && r.MsgRate < p.LimitMR) {
		e.pr.belowLimit = true
	}
}

// latStats mirrors print_report_lat: intervals between consecutive posts,
// sorted, the two largest dropped; t_max is then the largest kept, t_typical
// the median (integer mean of the middle two when even), t_stdev truncates
// each deviation to whole microseconds as perftest does.
type latStats struct {
	Min, Max, Typical, Avg, Stdev, P99, P999 float64
	Samples                                  []float64 // kept, sorted, for -H
	Unsorted                                 []float64 // for -U
}

func (e *engine) latResult() latStats {
	p := e.cfg
	n := p.Iters - 1
	rtt := 2.0
	if p.Test.Verb == Read || p.Test.Verb == Atomic {
		rtt = 1
	}
	units := float64(nsPerUsec)
	if p.Cycles {
		units = 1
	}
	q := units * rtt
	delta := latDeltas(e.meas.tposted[:n+1])
	var st latStats
	if p.Unsorted {
		for _, d := range delta {
			st.Unsorted = append(st.Unsorted, float64(d)/q)
		}
	}
	sort.Slice(delta, func(i, j int) bool { return delta[i] < delta[j] })
	m := n - latMeasureTail
	if m < 1 {
		m = 1
	}
	var median int64
	if (m-1)%2 != 0 {
		median = (delta[m/2] + delta[m/2-1]) / 2
	} else {
		median = delta[m/2]
	}
	sum := 0.0
	for i := 0; i < m; i++ {
		sum += float64(delta[i]) / q
	}
	avg := sum / float64(m)
	stdsum := 0.0
	for i := 0; i < m; i++ {
		v := int(avg - float64(delta[i])/q)
		stdsum += float64(v * v)
	}
	if p.Histogram {
		for i := 0; i < m; i++ {
			st.Samples = append(st.Samples, float64(delta[i])/q)
		}
	}
	i99 := int(math.Ceil(float64(m) * 0.99))
	i999 := int(math.Ceil(float64(m) * 0.999))
	at := func(i int) float64 {
		if i >= len(delta) {
			i = len(delta) - 1
		}
		return float64(delta[i]) / q
	}
	st.Min, st.Max, st.Typical, st.Avg = at(0), at(m), float64(median)/q, avg
	st.Stdev = math.Sqrt(stdsum / float64(m))
	st.P99, st.P999 = at(i99), at(i999)
	return st
}

// latDeltas are the samples: the intervals between consecutive posts. An
// interval that comes out negative (the thread moved to a CPU whose cycle
// counter lags: see clockSource.now) is clamped to zero, as a backward
// step of the clock carries no time; the next interval, measured on the
// new CPU's counter, is whole.
func latDeltas(tposted []int64) []int64 {
	n := len(tposted) - 1
	delta := make([]int64, max(n, 0))
	for i := 0; i < n; i++ {
		delta[i] = max(tposted[i+1]-tposted[i], 0)
	}
	return delta
}

func (e *engine) printLat(size int) {
	p := e.cfg
	if p.Duration != 0 {
		rtt := 2.0
		if p.Test.Verb == Read || p.Test.Verb == Atomic {
			rtt = 1
		}
		t := float64(e.meas.tcompleted[0] - e.meas.tposted[0])
		iters := float64(max(e.meas.iters, 1))
		lat := t / nsPerUsec / rtt / iters
		tps := iters / (t / nsPerSec)
		e.latDurRow(size, e.meas.iters, lat, tps)
		return
	}
	st := e.latResult()
	if p.Unsorted || p.Histogram {
		units := "usec"
		if p.Cycles {
			units = "cycles"
		}
		list := st.Unsorted
		if p.Unsorted {
			fmt.Fprintf(e.pr.out, "#, %s\n", units)
			for i, v := range list {
				fmt.Fprintf(e.pr.out, "%d, %s\n", i+1, cG(v))
			}
		}
		if p.Histogram {
			fmt.Fprintf(e.pr.out, "#, %s\n", units)
			for i, v := range st.Samples {
				fmt.Fprintf(e.pr.out, "%d, %s\n", i+1, cG(v))
			}
		}
		if p.Output == OutputFull && !p.JSON {
			fmt.Fprint(e.pr.out, resultLine+resultFmtLat+resultExt)
		}
	}
	e.latRow(size, st)
}

// latRow prints one latency result (print_report_lat's last lines).
func (e *engine) latRow(size int, st latStats) {
	p := e.cfg
	e.pr.records = append(e.pr.records, e.latRecord(size, st))
	switch {
	case p.JSON:
		e.emitJSON(e.pr.records[len(e.pr.records)-1])
	case p.Output == OutputLat:
		fmt.Fprintf(e.pr.out, "%f\n", st.Avg)
	default:
		fmt.Fprintf(e.pr.out, reportFmtLat, size, p.Iters, st.Min, st.Max, st.Typical, st.Avg, st.Stdev, st.P99, st.P999)
		e.cpuTail()
	}
}

// latDurRow prints a duration-mode latency result (print_report_lat_duration).
func (e *engine) latDurRow(size int, iters uint64, lat, tps float64) {
	p := e.cfg
	e.pr.records = append(e.pr.records, e.latDurRecord(size, lat, tps))
	switch {
	case p.JSON:
		e.emitJSON(e.pr.records[len(e.pr.records)-1])
	case p.Output == OutputLat:
		fmt.Fprintf(e.pr.out, "%f\n", lat)
	default:
		fmt.Fprintf(e.pr.out, reportFmtLatD, size, iters, lat, tps)
		e.cpuTail()
	}
}

func (e *engine) cpuTail() {
	if e.meas.cpu.enabled {
		fmt.Fprintf(e.pr.out, reportExtCPU, e.meas.cpu.util())
	} else {
		fmt.Fprint(e.pr.out, "\n")
	}
}

// cG is C's %g for the histogram dumps.
func cG(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// Record is one --json line / --out_json entry, and one size of a
// Result: a plain value.
type Record struct {
	Test       string             `json:"test"`
	Role       string             `json:"role"`
	Device     string             `json:"device"`
	Connection string             `json:"connection"`
	Size       int                `json:"size_bytes"`
	Iterations uint64             `json:"iterations"`
	Params     map[string]any     `json:"params"`
	BWPeak     *float64           `json:"bw_peak,omitempty"`
	BWAverage  *float64           `json:"bw_average,omitempty"`
	BWUnit     string             `json:"bw_unit,omitempty"`
	MsgRate    *float64           `json:"msg_rate,omitempty"`
	MsgUnit    string             `json:"msg_rate_unit,omitempty"`
	Lat        map[string]float64 `json:"latency,omitempty"`
	LatUnit    string             `json:"latency_unit,omitempty"`
	CPUUtil    *float64           `json:"cpu_util_percent,omitempty"`
}

func (e *engine) baseRecord(size int, iters uint64) Record {
	p := e.cfg
	role := "server"
	if p.Server != "" {
		role = "client"
	}
	r := Record{Test: p.Test.Name(), Role: role, Device: e.hw.dev.Name, Connection: p.Conn.String(), Size: size, Iterations: iters,
		Params: map[string]any{"qps": p.NumQPs, "mtu": e.hw.mtu.Bytes(), "tx_depth": p.TxDepth, "gid_index": p.GIDIndex,
			"ib_port": p.IBPort, "bidirectional": p.Bidir, "duration_s": p.Duration, "inline": p.Inline}}
	if p.Test.Kind == BW {
		r.Params["cq_mod"] = p.CQMod
		r.Params["post_list"] = p.PostList
	}
	if p.Test.Verb == Send {
		r.Params["rx_depth"] = p.RxDepth
	}
	if p.Test.Verb == Read || p.Test.Verb == Atomic {
		r.Params["outstanding_reads"] = e.hw.outReads
	}
	if p.Events {
		r.Params["events"] = true
		r.Params["comp_vector"] = p.CompVector
	}
	if p.Mcast {
		r.Params["mgid"] = e.groupGID().String()
	}
	if e.meas.cpu.enabled {
		u := e.meas.cpu.util()
		r.CPUUtil = &u
	}
	return r
}

func (e *engine) bwRecord(b bwReport) Record {
	r := e.baseRecord(int(b.Size), b.Iters)
	peak, avg, mr := b.Peak, b.Avg, b.MsgRate
	r.BWPeak, r.BWAverage, r.MsgRate = &peak, &avg, &mr
	r.BWUnit, r.MsgUnit = "MB/sec", "Mpps"
	if e.cfg.ReportGbits {
		r.BWUnit = "Gb/sec"
	}
	return r
}

func (e *engine) latRecord(size int, st latStats) Record {
	r := e.baseRecord(size, uint64(e.cfg.Iters))
	r.Lat = map[string]float64{"t_min": st.Min, "t_max": st.Max, "t_typical": st.Typical, "t_avg": st.Avg,
		"t_stdev": st.Stdev, "p99": st.P99, "p99_9": st.P999}
	r.LatUnit = "usec"
	if e.cfg.Cycles {
		r.LatUnit = "ns"
	}
	return r
}

func (e *engine) latDurRecord(size int, lat, tps float64) Record {
	r := e.baseRecord(size, e.meas.iters)
	r.Lat = map[string]float64{"t_avg": lat, "tps": tps}
	r.LatUnit = "usec"
	return r
}

func (e *engine) emitJSON(r Record) {
	b, _ := json.Marshal(r)
	fmt.Fprintf(e.pr.out, "%s\n", b)
}

// writeJSONFile writes every record as one JSON array (--out_json). The
// file is written beside its final name and renamed into place, so a reader
// never sees half of it and two runs given the same name (both sides of a
// test on one host) leave one whole file, not an interleaving of both.
func writeJSONFile(name string, records []Record) error {
	b, err := json.MarshalIndent(records, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(name, append(b, '\n'))
}

// writeFileAtomic writes b to a temporary file in name's directory and
// renames it to name (mode 0644, whatever the umask).
func writeFileAtomic(name string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// cpuUtil mirrors --cpu_util: the aggregate /proc/stat user time over user
// plus idle between the start and the end of the sample window.
type cpuUtil struct {
	enabled    bool
	user, idle [2]uint64
}

func readCPU() (user, idle uint64) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 4 && fs[0] == "cpu" {
			user, _ = strconv.ParseUint(fs[1], 10, 64)
			idle, _ = strconv.ParseUint(fs[4], 10, 64)
		}
	}
	return
}

func (c *cpuUtil) sample(i int) {
	if c.enabled {
		c.user[i], c.idle[i] = readCPU()
	}
}

func (c *cpuUtil) util() float64 {
	du, di := float64(c.user[1]-c.user[0]), float64(c.idle[1]-c.idle[0])
	if du+di == 0 {
		return 0
	}
	return du / (du + di) * 100
}
