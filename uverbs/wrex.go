package uverbs

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/ibgo/ibgo/internal/sys"
)

// The extended work-request API: rdma-core's struct ibv_qp_ex and its
// ibv_wr_* calls (libibverbs/verbs.h), for programs ported from C that build
// work requests one call at a time instead of filling struct ibv_send_wr.

// SendOps is the set of operations a QP may post through its QPEx (enum
// ibv_qp_create_send_ops_flags, QPInitAttr.SendOps).
type SendOps uint64

const (
	SendOpRDMAWrite        SendOps = 1 << 0
	SendOpRDMAWriteWithImm SendOps = 1 << 1
	SendOpSend             SendOps = 1 << 2
	SendOpSendWithImm      SendOps = 1 << 3
	SendOpRDMARead         SendOps = 1 << 4
	SendOpAtomicCmpAndSwp  SendOps = 1 << 5
	SendOpAtomicFetchAdd   SendOps = 1 << 6
	SendOpLocalInv         SendOps = 1 << 7
	SendOpBindMW           SendOps = 1 << 8
	SendOpSendWithInv      SendOps = 1 << 9
	SendOpTSO              SendOps = 1 << 10
	SendOpFlush            SendOps = 1 << 11
	SendOpAtomicWrite      SendOps = 1 << 12
)

var sendOpNames = [...]string{"RDMA_WRITE", "RDMA_WRITE_WITH_IMM", "SEND", "SEND_WITH_IMM", "RDMA_READ",
	"ATOMIC_CMP_AND_SWP", "ATOMIC_FETCH_AND_ADD", "LOCAL_INV", "BIND_MW", "SEND_WITH_INV", "TSO", "FLUSH", "ATOMIC_WRITE"}

func (o SendOps) String() string {
	var parts []string
	for i, n := range sendOpNames {
		if o&(1<<i) != 0 {
			parts = append(parts, n)
			o &^= 1 << i
		}
	}
	if o != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint64(o)))
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, "|")
}

// Memory access rights for FLUSH (IBV_ACCESS_FLUSH_GLOBAL/PERSISTENT): a
// FLUSH of a placement type the target MR was not registered for fails with
// WCRemAccessErr.
const (
	AccessFlushGlobal     Access = 1 << 8
	AccessFlushPersistent Access = 1 << 9
)

// FlushType is a FLUSH's placement type (IBV_FLUSH_GLOBAL, IBV_FLUSH_PERSISTENT).
type FlushType uint8

const (
	FlushGlobal     FlushType = 1 << 0 // visible to every later access
	FlushPersistent FlushType = 1 << 1 // persistent (the MR must be on persistent memory)
)

// FlushLevel is a FLUSH's selectivity level (enum ibv_selectivity_level).
type FlushLevel uint8

const (
	FlushRange FlushLevel = 0 // the given range
	FlushMR    FlushLevel = 1 // the whole MR the rkey names
)

// Device capability bits for FLUSH and ATOMIC_WRITE in
// DeviceAttr.DeviceCapFlagsEx (IB_UVERBS_DEVICE_FLUSH_GLOBAL,
// _FLUSH_PERSISTENT, _ATOMIC_WRITE in rdma/ib_user_verbs.h). rxe sets them
// from Linux 6.2 on.
const (
	DeviceFlushGlobal     uint64 = 1 << 38
	DeviceFlushPersistent uint64 = 1 << 39
	DeviceAtomicWrite     uint64 = 1 << 40
)

// SendOpsProvider is implemented by a ProviderContext that supports the
// extended work-request API: it says which SendOps a QP of type t may ask
// for (rdma-core's providers check send_ops_flags the same way, e.g.
// providers/rxe/rxe.c: check_qp_init_attr). A provider without it refuses
// every SendOps with ErrNotSupported.
type SendOpsProvider interface {
	SupportedSendOps(t QPType) SendOps
}

// checkSendOps validates QPInitAttr.SendOps before the QP is created: the
// provider must take them for the QP type, and FLUSH and ATOMIC_WRITE need
// the device (kernel) to have them, which rdma-core leaves to the first
// failing completion; ibgo says so up front.
func checkSendOps(c *Context, attr *QPInitAttr) error {
	if attr.SendOps == 0 {
		return nil
	}
	sp, ok := c.prov.(SendOpsProvider)
	if !ok {
		return fmt.Errorf("%w: the %s provider has no extended work-request API (QPInitAttr.SendOps)", ErrNotSupported, c.dev.Driver)
	}
	if extra := attr.SendOps &^ sp.SupportedSendOps(attr.Type); extra != 0 {
		return fmt.Errorf("%w: %s on a %s QP (the %s provider takes %s)", ErrNotSupported, extra, attr.Type, c.dev.Driver,
			sp.SupportedSendOps(attr.Type))
	}
	if attr.SendOps&(SendOpFlush|SendOpAtomicWrite) == 0 {
		return nil
	}
	da, err := c.QueryDevice()
	if err != nil {
		return err
	}
	if attr.SendOps&SendOpFlush != 0 && da.DeviceCapFlagsEx&(DeviceFlushGlobal|DeviceFlushPersistent) == 0 {
		return fmt.Errorf("%w: %s has no FLUSH (device_cap_flags_ex %#x; rxe has it from Linux 6.2)", ErrNotSupported,
			c.dev.Name, da.DeviceCapFlagsEx)
	}
	if attr.SendOps&SendOpAtomicWrite != 0 && da.DeviceCapFlagsEx&DeviceAtomicWrite == 0 {
		return fmt.Errorf("%w: %s has no ATOMIC_WRITE (device_cap_flags_ex %#x; rxe has it from Linux 6.2)", ErrNotSupported,
			c.dev.Name, da.DeviceCapFlagsEx)
	}
	return nil
}

// QPEx builds send work requests one call at a time, as rdma-core's
// ibv_wr_start / ibv_wr_* / ibv_wr_complete do: Start opens a batch, each
// builder (Send, RDMAWrite, ...) begins a work request with the current WRID
// and Flags, the setters (SetSGE, SetInlineData, SetUDAddr, ...) complete the
// last one, and Complete posts the batch with one doorbell (Abort drops it).
// Errors are sticky within a batch and returned by Complete, which then
// posts nothing, as rdma-core's providers do.
//
// The batch is kept in memory the QPEx owns (sized from the QP's caps when
// the QP was created, bounded by maxExBatch work requests and maxExInline
// inline bytes) and handed to the provider's PostSend at Complete, so
// every provider's own WQE builder is used; nothing allocates between
// Start and Complete. Inline data is copied when it is set, so the caller's
// buffers may be reused at once.
//
// Concurrency: Start takes the QPEx's lock and Complete or Abort releases
// it, so one goroutine at a time builds a batch and others wait in Start;
// the builders, setters, WRID and Flags belong to that goroutine between
// Start and Complete, and only it may call Complete or Abort.
// PostSend on the same QP remains usable concurrently.
type QPEx struct {
	// WRID and Flags go into each work request begun after they are set
	// (struct ibv_qp_ex: wr_id, wr_flags).
	WRID  uint64
	Flags SendFlags

	qp      *QP
	ops     SendOps
	mu      sync.Mutex
	started bool
	err     error
	n       int
	wrs     []SendWR
	sges    []SGE // maxSGE per work request
	maxSGE  int
	inl     []byte // inline bytes of the batch, in order
	inlOff  int
	maxInl  int
}

// ErrNoWR is returned (wrapped) by Complete when a setter ran before any
// builder in the batch.
var ErrNoWR = errors.New("no work request begun in this batch")

// A batch holds at most maxExBatch work requests and maxExInline inline
// bytes (or one work request's worth, if more), whatever the send queue's
// depth: the QPEx allocates its batch memory when the QP is created, and a
// QP of a million entries should not cost hundreds of MiB up front. A
// batch past either limit fails at Complete with ENOMEM/ENOSPC.
const (
	maxExBatch  = 4096
	maxExInline = 1 << 20
)

func newQPEx(qp *QP, ops SendOps) *QPEx {
	depth := min(int(qp.cap.MaxSendWR), maxExBatch)
	if depth < 1 {
		depth = 1
	}
	maxSGE := int(qp.cap.MaxSendSGE)
	if maxSGE < 1 {
		maxSGE = 1
	}
	x := &QPEx{qp: qp, ops: ops, wrs: make([]SendWR, depth), sges: make([]SGE, depth*maxSGE), maxSGE: maxSGE,
		maxInl: int(qp.cap.MaxInlineData)}
	inl := x.maxInl
	if ops&SendOpAtomicWrite != 0 && inl < 8 {
		inl = 8 // the 8 bytes of an ATOMIC_WRITE are staged here too
	}
	x.inl = make([]byte, max(min(depth*inl, maxExInline), inl))
	return x
}

// Ex returns the QP's extended work-request interface (ibv_qp_to_qp_ex), or
// nil when the QP was created without QPInitAttr.SendOps.
func (qp *QP) Ex() *QPEx { return qp.ex }

// SendOps are the operations the QP was created for.
func (x *QPEx) SendOps() SendOps { return x.ops }

// Start opens a batch (ibv_wr_start).
func (x *QPEx) Start() {
	x.mu.Lock()
	x.started, x.err, x.n, x.inlOff = true, nil, 0, 0
}

// Complete posts the batch with one doorbell and ends it (ibv_wr_complete).
// It returns the first error of the batch, in which case nothing is posted;
// otherwise it returns the provider's PostSend error, and the work requests
// before the failing one were posted.
func (x *QPEx) Complete() error {
	if !x.started {
		return &Error{Op: "wr complete", Err: fmt.Errorf("%w: no batch was started (call Start first)", sys.NewErrno(sys.EINVAL))}
	}
	err, n := x.err, x.n
	if err == nil && n > 0 {
		var posted int
		posted, err = x.qp.PostSend(x.wrs[:n])
		if err != nil && posted > 0 {
			err = fmt.Errorf("%d of %d work requests posted: %w", posted, n, err)
		}
	}
	x.clear()
	x.started = false
	x.mu.Unlock()
	if err != nil {
		return opErr(x.qp.ctx.dev.Name, "wr complete", err)
	}
	return nil
}

// Abort drops the batch (ibv_wr_abort).
func (x *QPEx) Abort() {
	if !x.started {
		return
	}
	x.clear()
	x.started = false
	x.mu.Unlock()
}

// clear drops the references the batch holds (AHs, the caller's nothing
// else: SGEs and inline bytes are copies).
func (x *QPEx) clear() {
	for i := 0; i < x.n; i++ {
		x.wrs[i].AH, x.wrs[i].Bind = nil, MWBindWR{}
	}
	x.n = 0
}

func (x *QPEx) fail(err error) {
	if x.err == nil {
		x.err = err
	}
}

// begin starts the next work request of the batch for operation op.
func (x *QPEx) begin(op SendOps, opcode WROpcode) *SendWR {
	if !x.started || x.err != nil {
		if !x.started {
			x.fail(fmt.Errorf("%w: %s outside Start/Complete", sys.NewErrno(sys.EINVAL), opcode))
		}
		return nil
	}
	if x.ops&op == 0 {
		x.fail(fmt.Errorf("%w: %s was not in the QP's SendOps (%s)", ErrNotSupported, opcode, x.ops))
		return nil
	}
	if x.n == len(x.wrs) {
		x.fail(fmt.Errorf("%w: more than %d work requests in one batch (the send queue's depth, at most %d)",
			sys.NewErrno(sys.ENOMEM), len(x.wrs), maxExBatch))
		return nil
	}
	w := &x.wrs[x.n]
	sgl := x.sges[x.n*x.maxSGE : x.n*x.maxSGE : (x.n+1)*x.maxSGE]
	*w = SendWR{WRID: x.WRID, Flags: x.Flags, Opcode: opcode, SGL: sgl}
	x.n++
	return w
}

// cur is the work request the setters complete.
func (x *QPEx) cur(what string) *SendWR {
	if x.err != nil {
		return nil
	}
	if !x.started || x.n == 0 {
		x.fail(fmt.Errorf("%w: %w (%s)", sys.NewErrno(sys.EINVAL), ErrNoWR, what))
		return nil
	}
	return &x.wrs[x.n-1]
}

// Send begins a SEND (ibv_wr_send).
func (x *QPEx) Send() { x.begin(SendOpSend, WRSend) }

// SendImm begins a SEND_WITH_IMM; imm is in host order (ibv_wr_send_imm
// takes it big-endian; ibgo converts, as for SendWR.Imm).
func (x *QPEx) SendImm(imm uint32) {
	if w := x.begin(SendOpSendWithImm, WRSendWithImm); w != nil {
		w.Imm = imm
	}
}

// SendInv begins a SEND_WITH_INV that invalidates rkey at the receiver
// (ibv_wr_send_inv).
func (x *QPEx) SendInv(invalidateRKey uint32) {
	if w := x.begin(SendOpSendWithInv, WRSendWithInv); w != nil {
		w.Imm = invalidateRKey
	}
}

// BindMW begins a bind of window mw to info's range with the new key rkey
// (ibv_wr_bind_mw; callers pass IncRKey(mw.RKey()) as rdma-core's do). It
// takes no SGE. The window is known by rkey (mw.RKey) once Complete posted
// it; peers may use the key after its completion. A zero-length bind of a
// type 1 window invalidates it.
func (x *QPEx) BindMW(mw *MW, rkey uint32, info MWBindInfo) {
	w := x.begin(SendOpBindMW, WRBindMW)
	if w == nil {
		return
	}
	switch {
	case mw == nil:
		x.fail(fmt.Errorf("%w: bind mw without a window", sys.NewErrno(sys.EINVAL)))
	case info.Length != 0 && info.MR == nil:
		x.fail(fmt.Errorf("%w: bind mw of %d bytes without an MR", sys.NewErrno(sys.EINVAL), info.Length))
	default:
		w.SGL = w.SGL[:0]
		w.Bind = MWBindWR{MW: mw, RKey: rkey, Info: info}
	}
}

// LocalInv begins a local invalidation of the window or MR key
// invalidateRKey (ibv_wr_local_inv). It takes no SGE.
func (x *QPEx) LocalInv(invalidateRKey uint32) {
	if w := x.begin(SendOpLocalInv, WRLocalInv); w != nil {
		w.Imm = invalidateRKey
	}
}

// RDMAWrite begins an RDMA WRITE to remoteAddr under rkey (ibv_wr_rdma_write).
func (x *QPEx) RDMAWrite(rkey uint32, remoteAddr uint64) {
	if w := x.begin(SendOpRDMAWrite, WRRDMAWrite); w != nil {
		w.RKey, w.RemoteAddr = rkey, remoteAddr
	}
}

// RDMAWriteImm begins an RDMA WRITE with immediate data (host order)
// (ibv_wr_rdma_write_imm).
func (x *QPEx) RDMAWriteImm(rkey uint32, remoteAddr uint64, imm uint32) {
	if w := x.begin(SendOpRDMAWriteWithImm, WRRDMAWriteWithImm); w != nil {
		w.RKey, w.RemoteAddr, w.Imm = rkey, remoteAddr, imm
	}
}

// RDMARead begins an RDMA READ from remoteAddr under rkey (ibv_wr_rdma_read).
func (x *QPEx) RDMARead(rkey uint32, remoteAddr uint64) {
	if w := x.begin(SendOpRDMARead, WRRDMARead); w != nil {
		w.RKey, w.RemoteAddr = rkey, remoteAddr
	}
}

// AtomicCmpSwp begins a compare-and-swap of the 8 bytes at remoteAddr; the
// original value lands in the SGE set next (ibv_wr_atomic_cmp_swp).
func (x *QPEx) AtomicCmpSwp(rkey uint32, remoteAddr, compare, swap uint64) {
	if w := x.begin(SendOpAtomicCmpAndSwp, WRAtomicCmpAndSwp); w != nil {
		w.RKey, w.RemoteAddr, w.CompareAdd, w.Swap = rkey, remoteAddr, compare, swap
	}
}

// AtomicFetchAdd begins a fetch-and-add (ibv_wr_atomic_fetch_add).
func (x *QPEx) AtomicFetchAdd(rkey uint32, remoteAddr, add uint64) {
	if w := x.begin(SendOpAtomicFetchAdd, WRAtomicFetchAndAdd); w != nil {
		w.RKey, w.RemoteAddr, w.CompareAdd = rkey, remoteAddr, add
	}
}

// AtomicWrite begins an ATOMIC WRITE of data to the 8-byte aligned
// remoteAddr (ibv_wr_atomic_write); the bytes are copied now and no SGE is
// needed.
func (x *QPEx) AtomicWrite(rkey uint32, remoteAddr uint64, data [8]byte) {
	w := x.begin(SendOpAtomicWrite, WRAtomicWrite)
	if w == nil {
		return
	}
	w.RKey, w.RemoteAddr = rkey, remoteAddr
	if b := x.stage(8, "atomic write"); b != nil {
		copy(b, data[:])
		w.InlineData = b
	}
}

// Flush begins a FLUSH of length bytes at remoteAddr (or the whole MR, with
// FlushMR) to placement type typ (ibv_wr_flush). It needs no SGE.
func (x *QPEx) Flush(rkey uint32, remoteAddr uint64, length uint32, typ FlushType, level FlushLevel) {
	if w := x.begin(SendOpFlush, WRFlush); w != nil {
		w.RKey, w.RemoteAddr, w.FlushLength, w.FlushType, w.FlushLevel = rkey, remoteAddr, length, typ, level
	}
}

// SetSGE gives the last work request one SGE (ibv_wr_set_sge); a zero
// length leaves it with none, as rdma-core's rxe does.
func (x *QPEx) SetSGE(lkey uint32, addr uint64, length uint32) {
	w := x.cur("set sge")
	if w == nil {
		return
	}
	w.SGL, w.InlineData = w.SGL[:0], nil
	if length != 0 {
		w.SGL = append(w.SGL, SGE{Addr: addr, Length: length, LKey: lkey})
	}
}

// SetSGEList gives the last work request the SGEs of sgl, copied
// (ibv_wr_set_sge_list).
func (x *QPEx) SetSGEList(sgl []SGE) {
	w := x.cur("set sge list")
	if w == nil {
		return
	}
	if len(sgl) > x.maxSGE {
		x.fail(fmt.Errorf("%w: %d SGEs, the QP takes %d", sys.NewErrno(sys.EINVAL), len(sgl), x.maxSGE))
		return
	}
	w.SGL, w.InlineData = append(w.SGL[:0], sgl...), nil
}

// stage reserves n bytes of the batch's inline area.
func (x *QPEx) stage(n int, what string) []byte {
	if x.inlOff+n > len(x.inl) {
		x.fail(fmt.Errorf("%w: %s: %d more inline bytes do not fit the batch's %d", sys.NewErrno(sys.ENOSPC), what, n, len(x.inl)))
		return nil
	}
	b := x.inl[x.inlOff : x.inlOff+n : x.inlOff+n]
	x.inlOff += n
	return b
}

// SetInlineData makes b, copied now, the last work request's inline payload
// (ibv_wr_set_inline_data). b need not be registered memory.
func (x *QPEx) SetInlineData(b []byte) {
	w := x.cur("set inline data")
	if w == nil {
		return
	}
	if len(b) > x.maxInl {
		x.fail(fmt.Errorf("%w: %d bytes inline, the QP takes %d", sys.NewErrno(sys.ENOSPC), len(b), x.maxInl))
		return
	}
	if d := x.stage(len(b), "set inline data"); d != nil {
		copy(d, b)
		w.InlineData, w.SGL, w.Flags = d, w.SGL[:0], w.Flags|SendInline
	}
}

// SetInlineDataList makes the concatenation of bufs the last work request's
// inline payload (ibv_wr_set_inline_data_list).
func (x *QPEx) SetInlineDataList(bufs [][]byte) {
	w := x.cur("set inline data list")
	if w == nil {
		return
	}
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	if total > x.maxInl {
		x.fail(fmt.Errorf("%w: %d bytes inline, the QP takes %d", sys.NewErrno(sys.ENOSPC), total, x.maxInl))
		return
	}
	d := x.stage(total, "set inline data list")
	if d == nil {
		return
	}
	off := 0
	for _, b := range bufs {
		off += copy(d[off:], b)
	}
	w.InlineData, w.SGL, w.Flags = d, w.SGL[:0], w.Flags|SendInline
}

// SetUDAddr addresses the last work request (UD) to remoteQPN behind ah
// (ibv_wr_set_ud_addr).
func (x *QPEx) SetUDAddr(ah *AH, remoteQPN, remoteQKey uint32) {
	if w := x.cur("set ud addr"); w != nil {
		w.AH, w.RemoteQPN, w.RemoteQKey = ah, remoteQPN, remoteQKey
	}
}
