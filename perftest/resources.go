package perftest

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/ibgo/ibgo/uverbs"
)

// engine is one run of a test. Its state is grouped by concern: the
// device and what was settled with it (hw), the verbs objects of the test
// (res), the out-of-band session with the peer (sess), the measurements
// (meas) and the output (pr). An engine is used by one goroutine, the
// test's; only the duration clock runs beside it (see durationClock).
type engine struct {
	cfg  *Config
	ctx  context.Context
	pr   printer
	hw   deviceInfo
	res  resources
	sess session
	meas measurements
	pace pacer
	ev   eventWait // -e
}

// deviceInfo is the device and what the test settled with it and the peer.
type deviceInfo struct {
	dev       *uverbs.Device
	ctx       *uverbs.Context
	attr      *uverbs.DeviceAttr
	linkLayer uverbs.LinkLayer
	mtu       uverbs.MTU
	gid       uverbs.GID
	withGID   bool
	outReads  int
	pageSize  int // perftest's cycle_buffer
	cacheLine int
}

// resources are the test's verbs objects (perftest: struct pingpong_context).
type resources struct {
	pd      *uverbs.PD
	mem     *uverbs.Memory
	mr      *uverbs.MR
	sendCQ  *uverbs.CQ
	recvCQ  *uverbs.CQ
	channel *uverbs.CompChannel // -e: both CQs report events here
	cmq     cmQPs               // -R: the rdma_cm ids that own the QPs
	mcast   []*uverbs.QP        // -g: QPs attached to mgid
	mgid    uverbs.GID
	srq     *uverbs.SRQ
	qps     []*uverbs.QP
	ahs     []*uverbs.AH
	bufSize int // BUFF_SIZE: one QP's region
	recvs   recvSet
}

// measurements are perftest's tposted/tcompleted (in nanoseconds) and the
// completions counted in duration mode.
type measurements struct {
	tposted    []int64
	tcompleted []int64
	iters      uint64
	cpu        cpuUtil
}

func (e *engine) close() {
	e.stopEvents()
	r := &e.res
	for _, ah := range r.ahs {
		ah.Close()
	}
	e.detachMcast()
	r.cmq.close() // destroys -R's QPs
	for _, qp := range r.qps {
		qp.Close()
	}
	r.srq.Close()
	r.sendCQ.Close()
	if r.recvCQ != r.sendCQ {
		r.recvCQ.Close()
	}
	r.channel.Close()
	r.mr.Close()
	r.mem.Close()
	r.pd.Close()
	e.hw.ctx.Close()
	if e.sess.stopCancel != nil {
		e.sess.stopCancel()
	}
	if e.sess.oob != nil {
		e.sess.oob.Close()
	}
}

// perftestKnownDevice says whether perftest 4.5 has this device in its
// table (ib_dev_name): it decides default inline sizes and prints a warning
// for devices it does not know. ConnectX (mlx5) is known; rxe is not.
func (e *engine) perftestKnownDevice() bool { return e.hw.dev.Driver == "mlx5" }

// open finds and opens the device and settles the parameters that depend on
// it (perftest: ctx_find_dev, ctx_open_device, verify_params_with_device_context,
// check_link).
func (e *engine) open() error {
	p := e.cfg
	var err error
	if p.Dev == "" {
		devs, err := uverbs.Devices()
		if err == nil && len(devs) == 0 {
			err = uverbs.ErrNoDevice
		}
		if err != nil {
			return &Error{Kind: KindDevice, op: opNoDevices, Err: err}
		}
		e.hw.dev = devs[0]
	} else if e.hw.dev, err = uverbs.DeviceByName(p.Dev); err != nil {
		if !errors.Is(err, uverbs.ErrNoDevice) {
			return &Error{Kind: KindDevice, op: opQueryDevice, Device: p.Dev, Err: err}
		}
		// Not a device name: perhaps the network interface bound to one
		// (an SR-IOV VF is known by its netdev), which also names the port.
		dev, port, nerr := uverbs.DeviceByNetdev(p.Dev)
		if nerr != nil {
			return &Error{Kind: KindDevice, op: opFindDevice, Device: p.Dev, Err: err}
		}
		if p.IBPort != 1 && p.IBPort != int(port.Port) {
			return &Error{Kind: KindConfig, op: opFindDevice, Device: p.Dev,
				Err: fmt.Errorf("network interface %s is port %d of %s, but -i asks for port %d", p.Dev, port.Port, dev.Name, p.IBPort)}
		}
		e.hw.dev, p.IBPort = dev, int(port.Port)
	}
	if e.hw.ctx, err = e.hw.dev.Open(); err != nil {
		return &Error{Kind: KindDevice, op: opOpenDevice, Device: e.hw.dev.Name, Err: err}
	}
	if e.hw.attr, err = e.hw.ctx.QueryDevice(); err != nil {
		return &Error{Kind: KindDevice, op: opQueryDevice, Device: e.hw.dev.Name, Err: err}
	}
	if p.IBPort > int(e.hw.attr.PhysPortCnt) {
		return &Error{Kind: KindDevice, op: opPortCount, Device: e.hw.dev.Name, Port: p.IBPort, Value: int(e.hw.attr.PhysPortCnt)}
	}
	pa, err := e.hw.ctx.QueryPort(uint8(p.IBPort))
	if err != nil {
		return &Error{Kind: KindDevice, op: opQueryPort, Device: e.hw.dev.Name, Port: p.IBPort, Err: err}
	}
	if pa.State != uverbs.PortActive {
		return &Error{Kind: KindDevice, op: opPortState, Device: e.hw.dev.Name, Port: p.IBPort, Text: pa.State.String()}
	}
	e.hw.linkLayer = pa.LinkLayer
	e.hw.mtu = pa.ActiveMTU
	if p.MTU != 0 {
		m := uverbs.MTUFromBytes(p.MTU)
		if m > pa.MaxMTU {
			return &Error{Kind: KindConfig, op: opMTU, Device: e.hw.dev.Name, Port: p.IBPort, Value: pa.MaxMTU.Bytes()}
		}
		e.hw.mtu = m
	}
	if p.Mcast && e.hw.linkLayer != uverbs.LinkLayerEthernet {
		return &Error{Kind: KindConfig, op: opMcastIB, Device: e.hw.dev.Name, Port: p.IBPort}
	}
	// RoCE (and IB with -x) carries a GRH: pick the GID as perftest does.
	if e.hw.linkLayer == uverbs.LinkLayerEthernet || p.GIDGiven {
		gids, err := e.hw.ctx.QueryGIDTable()
		if err != nil {
			return &Error{Kind: KindDevice, op: opQueryGIDs, Device: e.hw.dev.Name, Err: err}
		}
		if !p.GIDGiven {
			p.GIDIndex = bestGIDIndex(gids, uint32(p.IBPort), p.IPv6)
		}
		found := false
		for _, g := range gids {
			if int(g.Index) == p.GIDIndex && g.Port == uint32(p.IBPort) {
				e.hw.gid, found = g.GID, true
			}
		}
		if !found {
			return &Error{Kind: KindDevice, op: opGIDIndex, Device: e.hw.dev.Name, Port: p.IBPort, Value: p.GIDIndex}
		}
		e.hw.withGID = true
	}
	e.setInline()
	e.hw.outReads = 1
	if p.Test.Verb == Read || p.Test.Verb == Atomic {
		e.hw.outReads = int(e.hw.attr.MaxQPRdAtom)
		if p.OutReads > 0 {
			if p.OutReads > e.hw.outReads {
				fmt.Fprint(e.pr.out, resultLine)
				fmt.Fprintf(e.pr.errw, " Number of outstanding reads is above max = %d\n Changing to that max value\n", e.hw.outReads)
			} else {
				e.hw.outReads = p.OutReads
			}
		}
	}
	e.hw.pageSize = os.Getpagesize()
	e.hw.cacheLine = cacheLineSize()
	return nil
}

// setInline applies perftest's inline defaults (ctx_set_max_inline): on a
// device it does not know (rxe) inline is off, with a warning when asked for.
func (e *engine) setInline() {
	p := e.cfg
	if !e.perftestKnownDevice() {
		if p.Inline != -1 {
			fmt.Fprint(e.pr.out, resultLine)
			fmt.Fprintln(e.pr.errw, "Device not recognized to implement inline feature. Disabling it")
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

func (e *engine) isUD() bool { return e.cfg.Conn == UD }

// msgSpace is the largest message the buffers must hold (perftest: ctx->size).
func (e *engine) msgSpace() int {
	s := e.cfg.Size
	if e.cfg.All {
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
	p := e.cfg
	var err error
	if e.res.pd, err = e.hw.ctx.AllocPD(); err != nil {
		return &Error{Kind: KindResource, op: opAllocPD, Device: e.hw.dev.Name, Err: err}
	}
	e.res.bufSize = max(e.msgSpace(), e.hw.pageSize)
	total := inc(e.res.bufSize, e.hw.cacheLine) * 2 * p.NumQPs
	if e.res.mem, err = uverbs.AllocMemory(total, uverbs.MemoryOptions{HugePages: p.HugePages}); err != nil {
		return &Error{Kind: KindResource, op: opAllocBuf, Value: total, Err: err}
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
	if e.res.mr, err = e.res.pd.RegMR(e.res.mem.Bytes(), access); err != nil {
		return &Error{Kind: KindResource, op: opRegMR, Device: e.hw.dev.Name, Value: total, Err: err}
	}
	txDepth := p.TxDepth
	if err := e.createChannel(); err != nil {
		return err
	}
	cqAttr := func(n int) uverbs.CQInitAttr {
		return uverbs.CQInitAttr{CQE: n, Channel: e.res.channel, CompVector: p.CompVector}
	}
	if e.res.sendCQ, err = e.hw.ctx.CreateCQ(cqAttr(txDepth * p.NumQPs)); err != nil {
		return &Error{Kind: KindResource, op: opCreateCQ, Device: e.hw.dev.Name, Value: txDepth * p.NumQPs, Err: err}
	}
	e.res.recvCQ = e.res.sendCQ
	if p.Test.Verb == Send {
		if e.res.recvCQ, err = e.hw.ctx.CreateCQ(cqAttr(p.RxDepth * p.NumQPs)); err != nil {
			return &Error{Kind: KindResource, op: opCreateCQ, Device: e.hw.dev.Name, Value: p.RxDepth * p.NumQPs, Err: err}
		}
		if p.UseSRQ {
			// Each QP's share of rx_depth is posted to the SRQ (see postRecvs).
			maxWR := max(p.RxDepth, e.rxPerQP()*p.NumQPs)
			if e.res.srq, err = e.res.pd.CreateSRQ(uverbs.SRQInitAttr{MaxWR: uint32(maxWR), MaxSGE: 1}); err != nil {
				return &Error{Kind: KindResource, op: opCreateSRQ, Device: e.hw.dev.Name, Value: maxWR, Err: err}
			}
		}
	}
	typ := map[Conn]uverbs.QPType{RC: uverbs.QPTypeRC, UC: uverbs.QPTypeUC, UD: uverbs.QPTypeUD}[p.Conn]
	cp := uverbs.QPCap{MaxSendWR: uint32(txDepth), MaxSendSGE: 1, MaxInlineData: uint32(p.Inline)}
	if p.Test.Verb == Send && e.res.srq == nil {
		cp.MaxRecvWR, cp.MaxRecvSGE = uint32(p.RxDepth), 1
	} else if e.res.srq == nil {
		cp.MaxRecvWR, cp.MaxRecvSGE = 1, 1
	}
	var r [4]byte
	if p.WorkCM {
		qps, err := e.connectCMQPs(cp)
		if err != nil {
			return err
		}
		for i, qp := range qps {
			e.res.qps = append(e.res.qps, qp)
			rand.Read(r[:])
			d := Dest{LID: 0, OutReads: e.hw.outReads, QPN: qp.QPN(), PSN: binary.LittleEndian.Uint32(r[:]) & 0xffffff,
				RKey: e.res.mr.RKey(), VAddr: e.res.mr.Addr() + uint64((p.NumQPs+i)*e.res.bufSize), GID: e.hw.gid}
			e.sess.local = append(e.sess.local, d)
		}
		return nil
	}
	for i := 0; i < p.NumQPs; i++ {
		qp, err := e.res.pd.CreateQP(uverbs.QPInitAttr{Type: typ, SendCQ: e.res.sendCQ, RecvCQ: e.res.recvCQ, Cap: cp, SRQ: e.res.srq})
		if err != nil {
			return &Error{Kind: KindResource, op: opCreateQP, Device: e.hw.dev.Name, QP: i, Err: err}
		}
		e.res.qps = append(e.res.qps, qp)
		cpar := e.connectParams()
		if err := qp.Init(cpar); err != nil {
			return &Error{Kind: KindResource, op: opQPInit, Device: e.hw.dev.Name, QP: i, QPN: qp.QPN(), Err: err}
		}
		rand.Read(r[:])
		d := Dest{LID: 0, OutReads: e.hw.outReads, QPN: qp.QPN(), PSN: binary.LittleEndian.Uint32(r[:]) & 0xffffff,
			RKey: e.res.mr.RKey(), VAddr: e.res.mr.Addr() + uint64((p.NumQPs+i)*e.res.bufSize), GID: e.hw.gid}
		e.sess.local = append(e.sess.local, d)
	}
	return e.attachMcast()
}

// relaxedOrdering is what the banner's "PCIe relax order" reports; perftest
// turns it off for the write latency test.
func (e *engine) relaxedOrdering() bool { return !(e.cfg.Test.Verb == Write && e.cfg.Test.Kind == LAT) }

func (e *engine) connectParams() uverbs.ConnectParams {
	p := e.cfg
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
	return uverbs.ConnectParams{Port: uint8(p.IBPort), SGIDIndex: uint8(max(p.GIDIndex, 0)), MTU: e.hw.mtu, Access: acc,
		PkeyIndex: uint16(p.PkeyIndex), QKey: defQKey, Timeout: uint8(p.QPTimeout), RetryCnt: 7, RNRRetry: 7,
		MinRNRTimer: 12, HopLimit: 0xff, TrafficClass: uint8(p.TClass), SL: uint8(p.SL)}
}

// connect brings the QPs to RTS towards the remote destinations
// (perftest_resources.c: ctx_connect, ctx_modify_qp_to_rtr/rts).
func (e *engine) connect() error {
	p := e.cfg
	for i, qp := range e.res.qps {
		rd := e.sess.remote[i]
		cp := e.connectParams()
		cp.MaxDestRdAtomic = uint8(e.hw.outReads)
		cp.MaxRdAtomic = uint8(rd.OutReads)
		if cp.MaxRdAtomic == 0 {
			cp.MaxRdAtomic = 1
		}
		global := e.hw.withGID
		cp.Global = &global
		ep := uverbs.Endpoint{QPN: rd.QPN, PSN: rd.PSN, GID: rd.GID, LID: rd.LID}
		if err := qp.Connect(ep, e.sess.local[i].PSN, cp); err != nil {
			return &Error{Kind: KindResource, op: opQPConnect, Device: e.hw.dev.Name, QP: i, QPN: qp.QPN(), Err: err}
		}
		if p.Conn == UD {
			ah, err := e.res.pd.CreateAH(uverbs.AHAttr{IsGlobal: e.hw.withGID, Port: uint8(p.IBPort), DLID: rd.LID, SL: uint8(p.SL),
				GRH: uverbs.GlobalRoute{DGID: rd.GID, SGIDIndex: uint8(max(p.GIDIndex, 0)), HopLimit: 0xff, TrafficClass: uint8(p.TClass)}})
			if err != nil {
				return &Error{Kind: KindResource, op: opCreateAH, Device: e.hw.dev.Name, QP: i, Err: err}
			}
			e.res.ahs = append(e.res.ahs, ah)
		}
	}
	return nil
}

// rxPerQP is how many receives each QP gets at the start: rx_depth, or
// with an SRQ each QP's share of it (perftest: ctx_set_recv_wqes divides
// size_per_qp by num_of_qps), at least one.
func (e *engine) rxPerQP() int {
	if !e.cfg.UseSRQ {
		return e.cfg.RxDepth
	}
	return max(1, e.cfg.RxDepth/e.cfg.NumQPs)
}
