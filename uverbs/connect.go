package uverbs

import "fmt"

// Endpoint is what one side of a connection tells the other (what perftest
// and the ibv_*_pingpong examples exchange out of band).
type Endpoint struct {
	QPN uint32
	PSN uint32 // first packet sequence number the sender will use (24 bits)
	GID GID
	LID uint16 // InfiniBand only; 0 on RoCE
}

// ConnectParams are the local choices for bringing a QP up. Zero values take
// the defaults shown.
type ConnectParams struct {
	Port            uint8  // 1
	SGIDIndex       uint8  // local GID index (RoCE: the one for the local IP)
	MTU             MTU    // MTU1024
	Access          Access // LocalWrite|RemoteWrite|RemoteRead|RemoteAtomic (RC/UC)
	PkeyIndex       uint16 // 0
	QKey            uint32 // UD: 0x11111111
	Timeout         uint8  // RC: 14 (4.096 µs × 2^14 ≈ 67 ms)
	RetryCnt        uint8  // RC: 7
	RNRRetry        uint8  // RC: 7 (infinite)
	MinRNRTimer     uint8  // RC: 12 (0.64 ms)
	MaxRdAtomic     uint8  // RC: 1
	MaxDestRdAtomic uint8  // RC: 1
	HopLimit        uint8  // 64
	TrafficClass    uint8
	SL              uint8
	Global          *bool // send a GRH; default: true when the remote has a GID
}

func (p *ConnectParams) defaults(t QPType) {
	if p.Port == 0 {
		p.Port = 1
	}
	if p.MTU == 0 {
		p.MTU = MTU1024
	}
	if p.Access == 0 && t != QPTypeUD {
		p.Access = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead
		if t == QPTypeRC {
			p.Access |= AccessRemoteAtomic
		}
	}
	if p.QKey == 0 {
		p.QKey = 0x11111111
	}
	if p.Timeout == 0 {
		p.Timeout = 14
	}
	if p.RetryCnt == 0 {
		p.RetryCnt = 7
	}
	if p.RNRRetry == 0 {
		p.RNRRetry = 7
	}
	if p.MinRNRTimer == 0 {
		p.MinRNRTimer = 12
	}
	if p.MaxRdAtomic == 0 {
		p.MaxRdAtomic = 1
	}
	if p.MaxDestRdAtomic == 0 {
		p.MaxDestRdAtomic = 1
	}
	if p.HopLimit == 0 {
		p.HopLimit = 64
	}
}

// Init moves a QP from RESET to INIT with the attributes that transition
// requires (port, pkey index, and access flags or, for UD, the Q_Key).
func (qp *QP) Init(p ConnectParams) error {
	p.defaults(qp.typ)
	a := QPAttr{State: QPStateInit, PkeyIndex: p.PkeyIndex, Port: p.Port}
	mask := QPAttrState | QPAttrPkeyIndex | QPAttrPort
	if qp.typ == QPTypeUD {
		a.QKey = p.QKey
		mask |= QPAttrQKey
	} else {
		a.AccessFlags = p.Access
		mask |= QPAttrAccessFlags
	}
	return qp.Modify(&a, mask)
}

// Connect brings a QP from RESET through INIT and RTR to RTS: for RC and UC
// it points the QP at remote (its QPN, PSN and GID); for UD remote is unused
// except that localPSN starts the send queue. It mirrors what perftest's
// ctx_connect and ibv_rc_pingpong's pp_connect_ctx do.
func (qp *QP) Connect(remote Endpoint, localPSN uint32, p ConnectParams) error {
	p.defaults(qp.typ)
	if qp.State() == QPStateReset {
		if err := qp.Init(p); err != nil {
			return err
		}
	}
	rtr := QPAttr{State: QPStateRTR}
	mask := QPAttrState
	if qp.typ != QPTypeUD {
		global := !remote.GID.IsZero()
		if p.Global != nil {
			global = *p.Global
		}
		rtr.PathMTU = p.MTU
		rtr.DestQPN = remote.QPN
		rtr.RQPSN = remote.PSN & 0xffffff
		rtr.AH = AHAttr{DLID: remote.LID, SL: p.SL, Port: p.Port, IsGlobal: global}
		if global {
			rtr.AH.GRH = GlobalRoute{DGID: remote.GID, SGIDIndex: p.SGIDIndex, HopLimit: p.HopLimit, TrafficClass: p.TrafficClass}
		}
		mask |= QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN
		if qp.typ == QPTypeRC {
			rtr.MaxDestRdAtomic = p.MaxDestRdAtomic
			rtr.MinRNRTimer = p.MinRNRTimer
			mask |= QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer
		}
	}
	if err := qp.Modify(&rtr, mask); err != nil {
		return err
	}
	rts := QPAttr{State: QPStateRTS, SQPSN: localPSN & 0xffffff}
	mask = QPAttrState | QPAttrSQPSN
	if qp.typ == QPTypeRC {
		rts.Timeout, rts.RetryCnt, rts.RNRRetry, rts.MaxRdAtomic = p.Timeout, p.RetryCnt, p.RNRRetry, p.MaxRdAtomic
		mask |= QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxQPRdAtomic
	}
	if err := qp.Modify(&rts, mask); err != nil {
		return fmt.Errorf("%w (remote QPN %d PSN %d GID %s)", err, remote.QPN, remote.PSN, remote.GID)
	}
	return nil
}

// Reset moves the QP to RESET (from any state), discarding outstanding work.
func (qp *QP) Reset() error { return qp.Modify(&QPAttr{State: QPStateReset}, QPAttrState) }

// ToErr moves the QP to ERR: outstanding work requests complete with
// WR_FLUSH_ERR.
func (qp *QP) ToErr() error { return qp.Modify(&QPAttr{State: QPStateErr}, QPAttrState) }

// GIDIndexForIP returns the index of the RoCE v2 GID that holds ip on port
// (the IPv4-mapped or IPv6 address), as perftest and rdma_cm choose it.
func (c *Context) GIDIndexForIP(port uint8, ip GID) (uint8, error) {
	gids, err := c.QueryGIDTable()
	if err != nil {
		return 0, err
	}
	for _, g := range gids {
		if g.Port == uint32(port) && g.Type == GIDTypeRoCEv2 && g.GID == ip {
			return uint8(g.Index), nil
		}
	}
	return 0, &Error{Op: "find gid", Device: c.dev.Name, Err: fmt.Errorf("%w: no RoCE v2 GID %s on port %d", ErrNoDevice, ip, port)}
}
