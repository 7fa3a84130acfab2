package cm

import (
	"errors"
	"fmt"
	"sync"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/uverbs"
)

// AddrInfo is what QUERY ADDR reports about an id: its addresses and the
// RDMA device and port it is bound to (zero device fields before the id has
// a device).
type AddrInfo struct {
	Src, Dst    Addr
	NodeGUID    uverbs.GUID // raw big-endian, as uverbs reports it
	Port        uint8
	PKey        uint16
	DeviceIndex uint32 // the kernel's device index (RDMA netlink)
}

// Query asks the kernel for the id's addresses and device (QUERY ADDR).
func (id *ID) Query() (AddrInfo, error) { return id.query(abi.RDMA_USER_CM_QUERY_ADDR) }

// QueryGID is Query's GID form (QUERY GID): Src and Dst are AF_IB addresses
// holding the source and destination GIDs (IPv4-mapped on RoCE) and the
// service id.
func (id *ID) QueryGID() (AddrInfo, error) { return id.query(abi.RDMA_USER_CM_QUERY_GID) }

func (id *ID) query(option uint32) (AddrInfo, error) {
	out, err := id.exec(abi.RDMA_USER_CM_CMD_QUERY, abi.Size[abi.UcmQuery](), abi.Size[abi.UcmQueryAddrResp](), 0,
		func(in []byte, resp uint64, _ []byte) {
			c := abi.As[abi.UcmQuery](in)
			c.Response, c.ID, c.Option = resp, id.handle, option
		})
	if err != nil {
		return AddrInfo{}, cmdErr("query", err)
	}
	return parseQueryAddr(out)
}

func parseQueryAddr(out []byte) (AddrInfo, error) {
	r, ok := abi.Read[abi.UcmQueryAddrResp](out)
	if !ok {
		return AddrInfo{}, fmt.Errorf("cm: query response of %d bytes", len(out))
	}
	src, err := parseSockaddr(r.SrcAddr[:], int(r.SrcSize))
	if err != nil {
		return AddrInfo{}, err
	}
	dst, err := parseSockaddr(r.DstAddr[:], int(r.DstSize))
	if err != nil {
		return AddrInfo{}, err
	}
	return AddrInfo{Src: src, Dst: dst, NodeGUID: uverbs.GUID(r.NodeGUID), Port: r.PortNum, PKey: r.PKey,
		DeviceIndex: r.IBDevIndex}, nil
}

// PathRecord is one path of QUERY PATH: its flags (0x2B on RoCE:
// GMP|PRIMARY|BIDIRECTIONAL) and the 64-byte big-endian SA PathRecord.
type PathRecord struct {
	Flags  uint32
	Record [64]byte
}

// QueryPaths returns the id's resolved paths (none before ROUTE_RESOLVED).
func (id *ID) QueryPaths() ([]PathRecord, error) {
	const most = 6
	hdr, rec := abi.Size[abi.UcmQueryPathResp](), abi.Size[abi.IBPathRecData]()
	out, err := id.exec(abi.RDMA_USER_CM_CMD_QUERY, abi.Size[abi.UcmQuery](), hdr+most*rec, 0,
		func(in []byte, resp uint64, _ []byte) {
			c := abi.As[abi.UcmQuery](in)
			c.Response, c.ID, c.Option = resp, id.handle, abi.RDMA_USER_CM_QUERY_PATH
		})
	if err != nil {
		return nil, cmdErr("query path", err)
	}
	return parsePaths(out)
}

func parsePaths(out []byte) ([]PathRecord, error) {
	h, ok := abi.Read[abi.UcmQueryPathResp](out)
	if !ok {
		return nil, fmt.Errorf("cm: path response of %d bytes", len(out))
	}
	hdr, rec := abi.Size[abi.UcmQueryPathResp](), abi.Size[abi.IBPathRecData]()
	n := min(int(h.NumPaths), (len(out)-hdr)/rec)
	ps := make([]PathRecord, n)
	for i := range ps {
		r, _ := abi.Read[abi.IBPathRecData](out[hdr+i*rec:])
		ps[i] = PathRecord{Flags: r.Flags, Record: r.PathRec}
	}
	return ps, nil
}

// devRef is an opened device shared by the ids bound to it: librdmacm keeps
// one verbs context and one PD per device for all ids; so does this cache,
// with a count so the last id's Close closes it.
type devRef struct {
	index uint32
	ctx   *uverbs.Context
	pd    *uverbs.PD
	attr  *uverbs.DeviceAttr
	refs  int
}

var (
	devMu sync.Mutex
	devs  = map[uint32]*devRef{}
)

func acquireDevice(info AddrInfo) (*devRef, error) {
	devMu.Lock()
	defer devMu.Unlock()
	if d := devs[info.DeviceIndex]; d != nil {
		d.refs++
		return d, nil
	}
	all, err := uverbs.Devices()
	if err != nil {
		return nil, err
	}
	var dev *uverbs.Device
	for _, d := range all {
		if (d.HasIndex && d.Index == info.DeviceIndex) || (!d.HasIndex && d.NodeGUID == info.NodeGUID) {
			dev = d
			break
		}
	}
	if dev == nil {
		return nil, fmt.Errorf("no verbs device with index %d (node GUID %s): %w", info.DeviceIndex, info.NodeGUID, uverbs.ErrNoDevice)
	}
	ctx, err := dev.Open()
	if err != nil {
		return nil, err
	}
	attr, err := ctx.QueryDevice()
	if err != nil {
		ctx.Close()
		return nil, err
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		ctx.Close()
		return nil, err
	}
	d := &devRef{index: info.DeviceIndex, ctx: ctx, pd: pd, attr: attr, refs: 1}
	devs[info.DeviceIndex] = d
	return d, nil
}

func (d *devRef) release() {
	devMu.Lock()
	defer devMu.Unlock()
	d.refs--
	if d.refs > 0 {
		return
	}
	delete(devs, d.index)
	d.pd.Close()
	d.ctx.Close()
}

// device returns the id's device, opening it on first use (after the id is
// bound to a device: ADDR_RESOLVED, a specific-IP bind, or a request).
func (id *ID) device() (*devRef, error) {
	id.mu.Lock()
	d := id.dev
	id.mu.Unlock()
	if d != nil {
		return d, nil
	}
	info, err := id.Query()
	if err != nil {
		return nil, err
	}
	if info.NodeGUID == (uverbs.GUID{}) && info.DeviceIndex == 0 && info.Port == 0 {
		return nil, &Error{Op: "find the id's device", Err: fmt.Errorf("the id has no device yet (resolve an address or bind a specific IP first)")}
	}
	d, err = acquireDevice(info)
	if err != nil {
		return nil, &Error{Op: "open the id's device", Err: err}
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.closed {
		d.release()
		return nil, &Error{Op: "open the id's device", Kind: ErrClosed}
	}
	if id.dev != nil { // another goroutine was first
		d.release()
		return id.dev, nil
	}
	id.dev = d
	return d, nil
}

// Verbs returns the verbs context and protection domain of the id's device
// (librdmacm's id->verbs and id->pd): shared by every id on the device and
// owned by this package; do not close them. They stay open while the id
// (or another on the device) is.
func (id *ID) Verbs() (*uverbs.Context, *uverbs.PD, error) {
	d, err := id.device()
	if err != nil {
		return nil, nil, err
	}
	return d.ctx, d.pd, nil
}

// DeviceAttr is the id's device's QUERY_DEVICE answer (maxima for
// responder resources and initiator depth among others).
func (id *ID) DeviceAttr() (*uverbs.DeviceAttr, error) {
	d, err := id.device()
	if err != nil {
		return nil, err
	}
	return d.attr, nil
}

// QP returns the QP created on the id (nil if none).
func (id *ID) QP() *uverbs.QP {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.qp
}

// InitQPAttr asks the CM for the attributes that move a QP of this id to
// state (INIT_QP_ATTR; INIT, RTR or RTS), with the mask to pass to Modify,
// already limited to the bits uverbs accepts (mask &= 0x1FFFFF).
func (id *ID) InitQPAttr(state uverbs.QPState) (*uverbs.QPAttr, uverbs.QPAttrMask, error) {
	out, err := id.exec(abi.RDMA_USER_CM_CMD_INIT_QP_ATTR, abi.Size[abi.UcmInitQPAttr](), abi.Size[abi.QPAttrResp](), 0,
		func(in []byte, resp uint64, _ []byte) {
			c := abi.As[abi.UcmInitQPAttr](in)
			c.Response, c.ID, c.QPState = resp, id.handle, uint32(state)
		})
	if err != nil {
		return nil, 0, cmdErr("init qp attr "+state.String(), err)
	}
	r, _ := abi.Read[abi.QPAttrResp](out)
	a, m := qpAttrFromABI(&r)
	return a, m, nil
}

// validQPAttrMask is what MODIFY_QP accepts (uverbs_cmd.c rejects higher
// bits with EOPNOTSUPP; librdmacm's ucma_modify_qp_rtr masks 21..24 for the
// same reason).
const validQPAttrMask = 0x1FFFFF

func qpAttrFromABI(r *abi.QPAttrResp) (*uverbs.QPAttr, uverbs.QPAttrMask) {
	a := &uverbs.QPAttr{
		State: uverbs.QPState(r.QPState), CurState: uverbs.QPState(r.CurQPState), PathMTU: uverbs.MTU(r.PathMTU),
		PathMigState: uint8(r.PathMigState), QKey: r.QKey, RQPSN: r.RQPSN, SQPSN: r.SQPSN, DestQPN: r.DestQPNum,
		AccessFlags: uverbs.Access(r.QPAccessFlags),
		Cap:         uverbs.QPCap{MaxSendWR: r.MaxSendWR, MaxRecvWR: r.MaxRecvWR, MaxSendSGE: r.MaxSendSGE, MaxRecvSGE: r.MaxRecvSGE, MaxInlineData: r.MaxInlineData},
		AH:          ahFromABI(r.AHAttr), AltAH: ahFromABI(r.AltAHAttr),
		PkeyIndex: r.PkeyIndex, AltPkeyIndex: r.AltPkeyIndex, EnSQDAsyncNotify: r.EnSQDAsyncNotify != 0,
		SQDraining: r.SQDraining != 0, MaxRdAtomic: r.MaxRdAtomic, MaxDestRdAtomic: r.MaxDestRdAtomic,
		MinRNRTimer: r.MinRNRTimer, Port: r.PortNum, Timeout: r.Timeout, RetryCnt: r.RetryCnt, RNRRetry: r.RNRRetry,
		AltPort: r.AltPortNum, AltTimeout: r.AltTimeout,
	}
	return a, uverbs.QPAttrMask(r.QPAttrMask & validQPAttrMask)
}

// ModifyQP moves qp to state with the attributes INIT_QP_ATTR gives
// (librdmacm's ucma_modify_qp_*); hook, if not nil, may adjust them first.
func (id *ID) ModifyQP(qp *uverbs.QP, state uverbs.QPState, hook func(*uverbs.QPAttr, *uverbs.QPAttrMask)) error {
	a, m, err := id.InitQPAttr(state)
	if err != nil {
		return err
	}
	if hook != nil {
		hook(a, &m)
	}
	if err := qp.Modify(a, m); err != nil {
		return &Error{Op: "modify qp to " + state.String(), Err: err}
	}
	return nil
}

// QPInitAttr describes a QP to create on an id. Nil CQs: the id creates one
// CQ for both queues (sized for them) on a completion channel of its own
// (CompChannel), and destroys both with the id.
type QPInitAttr struct {
	SendCQ, RecvCQ *uverbs.CQ
	SRQ            *uverbs.SRQ
	Cap            uverbs.QPCap
	SigAll         bool
	// Timestamps asks for completion timestamps on the CQ the id creates
	// (when SendCQ or RecvCQ is nil), where the device has them: in the
	// wall-clock format where it writes that (uverbs.CQInitAttr.WallClock,
	// an mlx5 with the real-time clock), else free-running with a
	// completion clock (uverbs.Context.CompletionClock). Each WC.Timestamp
	// is then the HCA's completion time, which the CQ's CompletionClock
	// converts. Elsewhere (rxe), or when the kernel refuses each form of
	// timestamped CQ or a QP on it (ErrNotSupported), the CQ is made
	// without them; CQ.TimestampFormat of the id's CQ says which it got.
	// It has no effect on CQs the caller gives.
	Timestamps bool
}

// CreateQP creates the id's QP on pd (nil: the id's device's shared PD;
// librdmacm's rdma_create_qp) and moves it to INIT (UD ids: on to RTS, as
// ucma_init_ud_qp does) with INIT_QP_ATTR. The id owns the QP: Close (or
// DestroyQP) destroys it. Call it when the id has a device: after
// ROUTE_RESOLVED on the active side, on a CONNECT_REQUEST's child on the
// passive side.
func (id *ID) CreateQP(pd *uverbs.PD, attr QPInitAttr) (*uverbs.QP, error) {
	d, err := id.device()
	if err != nil {
		return nil, err
	}
	if pd == nil {
		pd = d.pd
	}
	if pd.Context().Device().Name != d.ctx.Device().Name {
		return nil, &Error{Op: "create qp", Err: fmt.Errorf("PD is on %s but the id is bound to %s", pd.Context().Device().Name, d.ctx.Device().Name)}
	}
	if id.QP() != nil {
		return nil, &Error{Op: "create qp", Err: fmt.Errorf("%v already has a QP", id)}
	}
	// The forms of the id's own CQ to try: timestamped ones best first,
	// then none (the kernel refuses a QP on a CQ whose format the device
	// lacks, so each refusal tries the next).
	var forms []uverbs.CQInitAttr
	if attr.Timestamps && (attr.SendCQ == nil || attr.RecvCQ == nil) {
		forms = uverbs.TimestampedCQAttrs(pd.Context(), uverbs.CQInitAttr{})
	}
	forms = append(forms, uverbs.CQInitAttr{})
	var qp *uverbs.QP
	var own *uverbs.CQ
	var cc *uverbs.CompChannel
	for i, f := range forms {
		qp, own, cc, err = id.newQP(pd, attr, f)
		if err == nil || i == len(forms)-1 || !errors.Is(err, uverbs.ErrNotSupported) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	id.mu.Lock()
	id.qp, id.ownCQ, id.ownCC, id.ownQP = qp, own, cc, true
	id.mu.Unlock()
	return qp, nil
}

// newQP is CreateQP's work: the id's own CQ (with stamps' completion
// timestamps) when the caller gave none, the QP, and the moves to INIT
// (UD: to RTS). On error nothing it made is left.
func (id *ID) newQP(pd *uverbs.PD, attr QPInitAttr, stamps uverbs.CQInitAttr) (_ *uverbs.QP, own *uverbs.CQ, cc *uverbs.CompChannel, err error) {
	if attr.SendCQ == nil || attr.RecvCQ == nil {
		n := int(attr.Cap.MaxSendWR + attr.Cap.MaxRecvWR)
		if cc, err = pd.Context().CreateCompChannel(); err != nil {
			return nil, nil, nil, &Error{Op: "create qp: its completion channel", Err: err}
		}
		stamps.CQE, stamps.Channel = max(n, 1), cc
		own, err = pd.Context().CreateCQ(stamps)
		if err != nil {
			cc.Close()
			return nil, nil, nil, &Error{Op: "create qp: its CQ", Err: err}
		}
		if attr.SendCQ == nil {
			attr.SendCQ = own
		}
		if attr.RecvCQ == nil {
			attr.RecvCQ = own
		}
	}
	qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: id.qpType, SendCQ: attr.SendCQ, RecvCQ: attr.RecvCQ, SRQ: attr.SRQ, Cap: attr.Cap, SigAll: attr.SigAll})
	if err == nil {
		err = id.ModifyQP(qp, uverbs.QPStateInit, nil)
		if err == nil && id.ud {
			// ucma_init_ud_qp: RTR and RTS need no CM attributes.
			if err = qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTR}, uverbs.QPAttrState); err == nil {
				err = qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTS}, uverbs.QPAttrState|uverbs.QPAttrSQPSN)
			}
		}
		if err != nil {
			qp.Close()
		}
	}
	if err != nil {
		if own != nil {
			own.Close()
			cc.Close()
		}
		return nil, nil, nil, &Error{Op: "create qp", Err: err}
	}
	return qp, own, cc, nil
}

// SetQP attaches a QP the caller created and keeps (Close does not destroy
// it) so that Connect, Accept and GetEvent drive it as they drive CreateQP's.
// The caller moves it to INIT (ModifyQP) itself.
func (id *ID) SetQP(qp *uverbs.QP) {
	id.mu.Lock()
	id.qp, id.ownQP = qp, false
	id.mu.Unlock()
}

// CompChannel is the completion channel of the CQ CreateQP made (nil when
// the caller gave the CQs): wait on it with GetEvent after CQ.ReqNotify.
func (id *ID) CompChannel() *uverbs.CompChannel {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.ownCC
}

// DestroyQP destroys the QP CreateQP made (rdma_destroy_qp), and its CQ.
func (id *ID) DestroyQP() error {
	id.mu.Lock()
	qp, cq, cc, own := id.qp, id.ownCQ, id.ownCC, id.ownQP
	id.qp, id.ownCQ, id.ownCC = nil, nil, nil
	id.mu.Unlock()
	return closeQP(qp, own, cq, cc)
}

func closeQP(qp *uverbs.QP, own bool, cq *uverbs.CQ, cc *uverbs.CompChannel) error {
	var errs []error
	if own && qp != nil {
		errs = append(errs, qp.Close())
	}
	if cq != nil {
		errs = append(errs, cq.Close())
	}
	if cc != nil {
		errs = append(errs, cc.Close())
	}
	return errors.Join(errs...)
}

// qpToRTS is librdmacm's ucma_modify_qp_rtr + ucma_modify_qp_rts: INIT
// again (the INIT→INIT refresh that picks up the access flags the CM
// exchange allows), RTR and RTS from INIT_QP_ATTR; with override, the
// responder resources and initiator depth replace the CM's (the passive
// side's clamped values).
func (id *ID) qpToRTS(respRes, initDepth uint8, override bool) error {
	qp := id.QP()
	if err := id.ModifyQP(qp, uverbs.QPStateInit, nil); err != nil {
		return err
	}
	if err := id.ModifyQP(qp, uverbs.QPStateRTR, func(a *uverbs.QPAttr, _ *uverbs.QPAttrMask) {
		if override {
			a.MaxDestRdAtomic = respRes
		}
	}); err != nil {
		return err
	}
	return id.ModifyQP(qp, uverbs.QPStateRTS, func(a *uverbs.QPAttr, _ *uverbs.QPAttrMask) {
		if override {
			a.MaxRdAtomic = initDepth
		}
	})
}

// establishQP completes an active connection on CONNECT_RESPONSE
// (librdmacm's ucma_process_conn_resp): QP to RTS, then the RTU.
func (id *ID) establishQP() error {
	if err := id.qpToRTS(0, 0, false); err != nil {
		return err
	}
	return id.Establish()
}
