package perftest

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/ibgo/ibgo/uverbs"
)

// engine is one run of a test: the verbs resources, the control connection
// and the measurements.
type engine struct {
	p    *Params
	out  io.Writer
	errw io.Writer

	dev     *uverbs.Device
	ctx     *uverbs.Context
	pd      *uverbs.PD
	mem     *uverbs.Memory
	mr      *uverbs.MR
	sendCQ  *uverbs.CQ
	recvCQ  *uverbs.CQ
	srq     *uverbs.SRQ
	qps     []*uverbs.QP
	ahs     []*uverbs.AH
	oob     *oob
	devAttr *uverbs.DeviceAttr

	linkLayer uverbs.LinkLayer
	mtu       uverbs.MTU
	gid       uverbs.GID
	withGID   bool
	outReads  int
	pageSize  int // perftest's cycle_buffer
	cacheLine int
	bufSize   int // BUFF_SIZE: one QP's region
	local     []Dest
	remote    []Dest

	// measurements (perftest's tposted/tcompleted, in nanoseconds)
	tposted    []int64
	tcompleted []int64
	iters      uint64 // completions counted (duration mode) or iterations
	cpu        cpuUtil
	recvs      *recvSet

	records     []Record
	limitFailed bool
	wd          watchdog
	yieldAt     int64 // next time now() yields
}

func (e *engine) close() {
	for _, ah := range e.ahs {
		ah.Close()
	}
	for _, qp := range e.qps {
		qp.Close()
	}
	e.srq.Close()
	e.sendCQ.Close()
	if e.recvCQ != e.sendCQ {
		e.recvCQ.Close()
	}
	e.mr.Close()
	e.mem.Close()
	e.pd.Close()
	e.ctx.Close()
	if e.oob != nil {
		e.oob.Close()
	}
}

// perftestKnownDevice says whether perftest 4.5 has this device in its
// table (ib_dev_name): it decides default inline sizes and prints a warning
// for devices it does not know. ConnectX (mlx5) is known; rxe is not.
func (e *engine) perftestKnownDevice() bool { return e.dev.Driver == "mlx5" }

// open finds and opens the device and settles the parameters that depend on
// it (perftest: ctx_find_dev, ctx_open_device, verify_params_with_device_context,
// check_link).
func (e *engine) open() error {
	p := e.p
	var err error
	if p.Dev == "" {
		devs, err := uverbs.Devices()
		if err != nil {
			return fmt.Errorf(" Did not detect devices \n If device exists, check if driver is up\n %v", err)
		}
		e.dev = devs[0]
	} else if e.dev, err = uverbs.DeviceByName(p.Dev); err != nil {
		if errors.Is(err, uverbs.ErrNoDevice) {
			return fmt.Errorf(" IB device %s not found\n %v", p.Dev, err)
		}
		return err
	}
	if e.ctx, err = e.dev.Open(); err != nil {
		return fmt.Errorf(" Couldn't get context for the device: %v", err)
	}
	if e.devAttr, err = e.ctx.QueryDevice(); err != nil {
		return err
	}
	if p.IBPort > int(e.devAttr.PhysPortCnt) {
		return fmt.Errorf(" Invalid port %d: %s has %d", p.IBPort, e.dev.Name, e.devAttr.PhysPortCnt)
	}
	pa, err := e.ctx.QueryPort(uint8(p.IBPort))
	if err != nil {
		return err
	}
	if pa.State != uverbs.PortActive {
		return fmt.Errorf(" Port %d of %s is %s, not PORT_ACTIVE", p.IBPort, e.dev.Name, pa.State)
	}
	e.linkLayer = pa.LinkLayer
	e.mtu = pa.ActiveMTU
	if p.MTU != 0 {
		m := uverbs.MTUFromBytes(p.MTU)
		if m > pa.MaxMTU {
			return fmt.Errorf(" Requested mtu is higher than supported by the port (max %d)", pa.MaxMTU.Bytes())
		}
		e.mtu = m
	}
	// RoCE (and IB with -x) carries a GRH: pick the GID as perftest does.
	if e.linkLayer == uverbs.LinkLayerEthernet || p.GIDGiven {
		gids, err := e.ctx.QueryGIDTable()
		if err != nil {
			return err
		}
		if !p.GIDGiven {
			p.GIDIndex = bestGIDIndex(gids, uint32(p.IBPort), p.IPv6)
		}
		found := false
		for _, g := range gids {
			if int(g.Index) == p.GIDIndex && g.Port == uint32(p.IBPort) {
				e.gid, found = g.GID, true
			}
		}
		if !found {
			return fmt.Errorf(" Failed to query GID index %d of %s port %d: no such entry", p.GIDIndex, e.dev.Name, p.IBPort)
		}
		e.withGID = true
	}
	e.setInline()
	e.outReads = 1
	if p.Test.Verb == Read || p.Test.Verb == Atomic {
		e.outReads = int(e.devAttr.MaxQPRdAtom)
		if p.OutReads > 0 {
			if p.OutReads > e.outReads {
				fmt.Fprint(e.out, resultLine)
				fmt.Fprintf(e.errw, " Number of outstanding reads is above max = %d\n Changing to that max value\n", e.outReads)
			} else {
				e.outReads = p.OutReads
			}
		}
	}
	e.pageSize = os.Getpagesize()
	e.cacheLine = cacheLineSize()
	return nil
}

// setInline applies perftest's inline defaults (ctx_set_max_inline): on a
// device it does not know (rxe) inline is off, with a warning when asked for.
func (e *engine) setInline() {
	p := e.p
	if !e.perftestKnownDevice() {
		if p.Inline != -1 {
			fmt.Fprint(e.out, resultLine)
			fmt.Fprintln(e.errw, "Device not recognized to implement inline feature. Disabling it")
		}
		p.Inline = 0
	} else if p.Inline == -1 {
		p.Inline = 0
		if p.Test.Kind == LAT {
			switch p.Test.Verb {
			case Write:
				p.Inline = 220
			case Send:
				p.Inline = 236
				if p.Conn == UD {
					p.Inline = 188
				}
			}
		}
	}
}

// bestGIDIndex mirrors perftest 4.5's get_best_gid_index: starting from
// index 0, prefer an IPv4-mapped GID (an IPv6 one with --ipv6), then a
// newer RoCE version; ties keep the lower index.
func bestGIDIndex(gids []uverbs.GIDEntry, port uint32, ipv6 bool) int {
	byIndex := map[uint32]uverbs.GIDEntry{}
	var max uint32
	for _, g := range gids {
		if g.Port == port {
			byIndex[g.Index] = g
			if g.Index > max {
				max = g.Index
			}
		}
	}
	v4 := func(g uverbs.GID) bool { return g.IP().To4() != nil && !g.IsZero() }
	best := uint32(0)
	for i := uint32(1); i <= max; i++ {
		rival, ok := byIndex[i]
		if !ok {
			continue
		}
		cur, curOK := byIndex[best]
		rv, cv := v4(rival.GID), curOK && v4(cur.GID)
		switch {
		case rv && !cv && !ipv6:
			best = i
		case !rv && cv && ipv6:
			best = i
		case curOK && rival.Type > cur.Type && rival.Type != uverbs.GIDTypeIB:
			best = i
		}
	}
	return int(best)
}

func cacheLineSize() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/cpu0/cache/index0/coherency_line_size")
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
			return n
		}
	}
	return 64
}

// inc is perftest's INC: size rounded up to a whole number of cache lines.
func inc(size, cl int) int {
	if size <= cl {
		return cl
	}
	return (size + cl - 1) / cl * cl
}

func (e *engine) isUD() bool { return e.p.Conn == UD }

// ctxSize is the largest message the buffers must hold (perftest: ctx->size).
func (e *engine) ctxSize() int {
	s := e.p.Size
	if e.p.All {
		s = maxSize
	}
	if e.isUD() {
		s += 40
	}
	return s
}

// setup creates PD, buffer, MR, CQs and QPs and brings the QPs to INIT
// (perftest: ctx_init, set_up_connection).
func (e *engine) setup() error {
	p := e.p
	var err error
	if e.pd, err = e.ctx.AllocPD(); err != nil {
		return err
	}
	e.bufSize = max(e.ctxSize(), e.pageSize)
	total := inc(e.bufSize, e.cacheLine) * 2 * p.NumQPs
	if e.mem, err = uverbs.AllocMemory(total, uverbs.MemoryOptions{HugePages: p.HugePages}); err != nil {
		return fmt.Errorf(" Couldn't allocate work buf: %v", err)
	}
	access := uverbs.AccessLocalWrite
	switch p.Test.Verb {
	case Write:
		access |= uverbs.AccessRemoteWrite
	case Read:
		access |= uverbs.AccessRemoteRead
	case Atomic:
		access |= uverbs.AccessRemoteAtomic | uverbs.AccessRemoteWrite
	}
	if e.relaxedOrdering() {
		access |= uverbs.AccessRelaxedOrdering
	}
	if e.mr, err = e.pd.RegMR(e.mem.Bytes(), access); err != nil {
		return fmt.Errorf("Couldn't allocate MR: %v", err)
	}
	txDepth := p.TxDepth
	if e.sendCQ, err = e.ctx.CreateCQ(uverbs.CQInitAttr{CQE: txDepth * p.NumQPs}); err != nil {
		return fmt.Errorf(" Couldn't create CQ: %v", err)
	}
	e.recvCQ = e.sendCQ
	if p.Test.Verb == Send {
		if e.recvCQ, err = e.ctx.CreateCQ(uverbs.CQInitAttr{CQE: p.RxDepth * p.NumQPs}); err != nil {
			return fmt.Errorf(" Couldn't create CQ: %v", err)
		}
		if p.UseSRQ {
			if e.srq, err = e.pd.CreateSRQ(uverbs.SRQInitAttr{MaxWR: uint32(p.RxDepth), MaxSGE: 1}); err != nil {
				return fmt.Errorf(" Couldn't create SRQ: %v", err)
			}
		}
	}
	typ := map[Conn]uverbs.QPType{RC: uverbs.QPTypeRC, UC: uverbs.QPTypeUC, UD: uverbs.QPTypeUD}[p.Conn]
	cp := uverbs.QPCap{MaxSendWR: uint32(txDepth), MaxSendSGE: 1, MaxInlineData: uint32(p.Inline)}
	if p.Test.Verb == Send && e.srq == nil {
		cp.MaxRecvWR, cp.MaxRecvSGE = uint32(p.RxDepth), 1
	} else if e.srq == nil {
		cp.MaxRecvWR, cp.MaxRecvSGE = 1, 1
	}
	var r [4]byte
	for i := 0; i < p.NumQPs; i++ {
		qp, err := e.pd.CreateQP(uverbs.QPInitAttr{Type: typ, SendCQ: e.sendCQ, RecvCQ: e.recvCQ, Cap: cp, SRQ: e.srq})
		if err != nil {
			return fmt.Errorf(" Couldn't create QP: %v", err)
		}
		e.qps = append(e.qps, qp)
		cpar := e.connectParams()
		if err := qp.Init(cpar); err != nil {
			return fmt.Errorf(" Failed to modify QP %d to INIT: %v", qp.QPN(), err)
		}
		rand.Read(r[:])
		d := Dest{LID: 0, OutReads: e.outReads, QPN: qp.QPN(), PSN: binary.LittleEndian.Uint32(r[:]) & 0xffffff,
			RKey: e.mr.RKey(), VAddr: e.mr.Addr() + uint64((p.NumQPs+i)*e.bufSize), GID: e.gid}
		e.local = append(e.local, d)
	}
	return nil
}

// relaxedOrdering is what the banner's "PCIe relax order" reports; perftest
// turns it off for the write latency test.
func (e *engine) relaxedOrdering() bool { return !(e.p.Test.Verb == Write && e.p.Test.Kind == LAT) }

func (e *engine) connectParams() uverbs.ConnectParams {
	p := e.p
	var acc uverbs.Access
	switch p.Test.Verb {
	case Write:
		acc = uverbs.AccessRemoteWrite
	case Read:
		acc = uverbs.AccessRemoteRead
	case Atomic:
		acc = uverbs.AccessRemoteAtomic
	case Send:
		acc = uverbs.AccessRemoteWrite | uverbs.AccessLocalWrite
	}
	if p.Conn == UC {
		acc = uverbs.AccessRemoteWrite | uverbs.AccessLocalWrite
	}
	return uverbs.ConnectParams{Port: uint8(p.IBPort), SGIDIndex: uint8(max(p.GIDIndex, 0)), MTU: e.mtu, Access: acc,
		PkeyIndex: uint16(p.PkeyIndex), QKey: defQKey, Timeout: uint8(p.QPTimeout), RetryCnt: 7, RNRRetry: 7,
		MinRNRTimer: 12, HopLimit: 0xff, TrafficClass: uint8(p.TClass), SL: uint8(p.SL)}
}

// connect brings the QPs to RTS towards the remote destinations
// (perftest_resources.c: ctx_connect, ctx_modify_qp_to_rtr/rts).
func (e *engine) connect() error {
	p := e.p
	for i, qp := range e.qps {
		rd := e.remote[i]
		cp := e.connectParams()
		cp.MaxDestRdAtomic = uint8(e.outReads)
		cp.MaxRdAtomic = uint8(rd.OutReads)
		if cp.MaxRdAtomic == 0 {
			cp.MaxRdAtomic = 1
		}
		global := e.withGID
		cp.Global = &global
		ep := uverbs.Endpoint{QPN: rd.QPN, PSN: rd.PSN, GID: rd.GID, LID: rd.LID}
		if err := qp.Connect(ep, e.local[i].PSN, cp); err != nil {
			return fmt.Errorf("Failed to modify QP %d to RTR/RTS: %v\n Unable to Connect the HCA's through the link", qp.QPN(), err)
		}
		if p.Conn == UD {
			ah, err := e.pd.CreateAH(uverbs.AHAttr{IsGlobal: e.withGID, Port: uint8(p.IBPort), DLID: rd.LID, SL: uint8(p.SL),
				GRH: uverbs.GlobalRoute{DGID: rd.GID, SGIDIndex: uint8(max(p.GIDIndex, 0)), HopLimit: 0xff, TrafficClass: uint8(p.TClass)}})
			if err != nil {
				return fmt.Errorf("Failed to create AH for UD: %v", err)
			}
			e.ahs = append(e.ahs, ah)
		}
	}
	return nil
}

// establish runs the control exchange up to the key messages (perftest main:
// establish_connection, exchange_versions, check_sys_data, check_mtu).
func (e *engine) establish() error {
	p := e.p
	var err error
	if p.Server == "" {
		e.waitBanner()
		e.oob, err = listenOOB(p.Port)
	} else {
		e.oob, err = dialOOB(p.Server, p.Port, time.Duration(p.ConnectFor)*time.Second)
	}
	if err != nil {
		return fmt.Errorf("%v\n Unable to init the socket connection", err)
	}
	e.oob.withGID = e.withGID
	e.startWatchdog()
	if p.DontXchg {
		return errors.New(" --dont_xchg_versions: perftest exits against any peer with it (its version check reads an empty version); ibgo refuses it")
	}
	if err := e.oob.versions(); err != nil {
		return err
	}
	if err := e.oob.sysData(&e.pageSize, &e.cacheLine); err != nil {
		return err
	}
	if e.mtu, err = e.oob.mtu(e.mtu); err != nil {
		return err
	}
	if p.Conn == UD && p.Size > e.mtu.Bytes() {
		if p.All || !p.SizeGiven {
			fmt.Fprintf(e.errw, " Max msg size in UD is MTU %d\n Changing to this MTU\n", e.mtu.Bytes())
			p.Size = e.mtu.Bytes()
		} else {
			return fmt.Errorf(" Max message size in UD cannot be greater than MTU (%d)", e.mtu.Bytes())
		}
	}
	return e.oob.compareParams(summarize(p, e.withGID))
}

func (e *engine) waitBanner() {
	if e.p.Output == OutputFull && !e.p.JSON {
		fmt.Fprint(e.out, "\n************************************\n* Waiting for client to connect... *\n************************************\n")
	}
}

// checkGIDs fails when one side uses an IPv4-mapped GID and the other not
// (ctx_check_gid_compatibility).
func (e *engine) checkGIDs() error {
	if !e.withGID {
		return nil
	}
	v4 := func(g uverbs.GID) bool { return g.IP().To4() != nil }
	if v4(e.local[0].GID) != v4(e.remote[0].GID) {
		return fmt.Errorf("\n Found Incompatibility issue with GID types.\n Please Try to use a different IP version.\n (local GID %s, remote GID %s)", e.local[0].GID, e.remote[0].GID)
	}
	return nil
}

// now is the loops' clock (see clock.go). It is also where a loop yields
// the processor, every yieldEvery: a goroutine that runs for 10 ms without
// passing through the scheduler gets a preemption signal from the runtime's
// monitor, which under emulation costs about 0.4 ms a time (async preemption
// was 4-5 % of write_bw's time in the VM). The yield happens before the time
// is read, so it never sits between a timestamp and the post it stamps.
func (e *engine) now() int64 {
	t := clk.now()
	if t < e.yieldAt {
		return t
	}
	e.yieldAt = t + yieldEvery
	runtime.Gosched()
	return clk.now()
}

const yieldEvery = 2e6 // ns
