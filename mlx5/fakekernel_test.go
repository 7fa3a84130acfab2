package mlx5

import (
	"encoding/binary"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
	"github.com/ibgo/ibgo/uverbs"
)

// fakeKernel answers the uverbs file of one fake mlx5 device the way the
// emulated kernel behind the golden vectors does, through the
// internal/sys seam (sys.InstallFakeKernel): every ioctl is refused with
// ENOTTY, so uverbs falls back to the legacy write commands, which it
// answers with plausible handles, QPNs and CQNs and the mlx5 driver
// responses the vectors show (alloc_ucontext as testCtxResp). mmap of the
// UAR pages and the clock page returns plain anonymous memory the test can
// read. Objects it creates are fed to the device model: REG_MR registers
// memory, MODIFY_QP with a destination QPN connects model QPs.
type fakeKernel struct {
	t    testing.TB
	path string
	mu   sync.Mutex
	raw  int // the uverbs descriptor (-1 when closed)
	dev  *devModel

	asyncW  *sys.FD
	next    uint32                      // handle counter
	qpn     uint32                      // next QPN
	cqn     uint32                      // next CQN
	uar     map[int64][]byte            // mapped UAR pages by page offset
	clock   []byte                      // the clock-info page
	mrs     map[uint32]uint32           // MR handle -> key
	qpDest  map[uint32]uint32           // QPN -> dest QPN
	handles map[uint32]uint32           // QP handle -> QPN
	bfreg   uint32                      // next bfreg the kernel hands out
	cmds    []uint32                    // write commands seen, in order (write(2) and INVOKE_WRITE)
	writes  int                         // commands that came through write(2)
	qpReq   map[uint32]abi.Mlx5CreateQP // QP handle -> its driver request
	ioctl   bool                        // answer the ioctl methods (else ENOTTY: write(2) only)
	invoked int                         // write commands that came through INVOKE_WRITE
	cqBuf   map[uint32]uint64           // CQ handle -> its ring's address
	rings   []*cqRing                   // provider rings (watchCQ)
	resized int                         // RESIZE_CQ commands that moved a ring
	methods [][2]uint16                 // ioctl (object, method) pairs seen, in order
	cqFlags []uint32                    // create-CQ flags seen, in order
	tsMask  uint64                      // EX_QUERY_DEVICE's completion_timestamp_mask (mlx5_ib: 2^63-1)
	// noClockInfo: alloc_ucontext offers no clock-info page (an mlx5_ib
	// without clock_info_versions V1)
	noClockInfo bool
	// realTime: alloc_ucontext offers the real-time timestamp format
	// (MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS)
	realTime bool
	cqUHW    [][]byte // each create-CQ's driver request (mlx5_ib_create_cq), copied, in order
}

const fakeUverbsPath = "/ibgo-fake/infiniband/uverbs0"

func newFakeKernel(t testing.TB, ioctl bool) *fakeKernel {
	k := &fakeKernel{t: t, path: fakeUverbsPath, raw: -1, dev: newDevModel(), next: 1, qpn: 0x1a0, cqn: 0x400,
		uar: map[int64][]byte{}, mrs: map[uint32]uint32{}, qpDest: map[uint32]uint32{}, handles: map[uint32]uint32{},
		bfreg: 2, qpReq: map[uint32]abi.Mlx5CreateQP{}, ioctl: ioctl,
		cqBuf: map[uint32]uint64{}, tsMask: 1<<63 - 1}
	restore, err := sys.InstallFakeKernel(k)
	require.NoError(t, err)
	t.Cleanup(func() {
		restore()
		if k.asyncW != nil {
			k.asyncW.Close()
		}
	})
	return k
}

// overBoth runs f over a kernel without the ioctl framework (every command
// through write(2)) and over one with it (the native create/destroy
// methods, GET_CONTEXT and ASYNC_EVENT_ALLOC, the rest through
// INVOKE_WRITE), as uverbs chooses by itself.
func overBoth(t *testing.T, f func(t *testing.T, ioctl bool)) {
	t.Run("write", func(t *testing.T) { f(t, false) })
	t.Run("ioctl", func(t *testing.T) { f(t, true) })
}

// device is the uverbs.Device a discovery would report for the fake.
func (k *fakeKernel) device() *uverbs.Device {
	return &uverbs.Device{Name: "mlx5_fake0", Driver: "mlx5", DriverID: abi.RDMA_DRIVER_MLX5,
		Uverbs: "uverbs0", UverbsPath: k.path, ABIVersion: abi.IB_USER_VERBS_ABI_VERSION}
}

func (k *fakeKernel) Claims(path string) bool { return path == k.path }
func (k *fakeKernel) Opened(_ string, raw int) {
	k.mu.Lock()
	k.raw = raw
	k.mu.Unlock()
}
func (k *fakeKernel) Closed(raw int) {
	k.mu.Lock()
	if raw == k.raw {
		k.raw = -1
	}
	k.mu.Unlock()
}
func (k *fakeKernel) mine(raw int) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return raw == k.raw && raw >= 0
}

// Ioctl refuses every ioctl with ENOTTY (a kernel without the ioctl
// framework: uverbs falls back to write(2)) unless k.ioctl is set; then it
// answers the methods a 5.6+ kernel has as the vectors' emulated kernel
// does (ioctlMethod) and the write commands through INVOKE_WRITE.
func (k *fakeKernel) Ioctl(raw int, req uintptr, arg unsafe.Pointer) (bool, error) {
	if !k.mine(raw) {
		return false, nil
	}
	if !k.ioctl {
		return true, sys.NewErrno(sys.ENOTTY)
	}
	h := (*abi.IoctlHdr)(arg)
	if req != abi.RDMA_VERBS_IOCTL || h.DriverID != abi.RDMA_DRIVER_MLX5 ||
		int(h.Length) != int(unsafe.Sizeof(*h))+int(h.NumAttrs)*int(unsafe.Sizeof(abi.Attr{})) {
		return true, sys.NewErrno(sys.EINVAL)
	}
	a := fkAttrs(unsafe.Slice((*abi.Attr)(unsafe.Add(arg, unsafe.Sizeof(*h))), h.NumAttrs))
	k.mu.Lock()
	defer k.mu.Unlock()
	k.methods = append(k.methods, [2]uint16{h.ObjectID, h.MethodID})
	efault = false
	err := k.ioctlMethod(h.ObjectID, h.MethodID, a)
	if efault && err == nil {
		err = sys.NewErrno(sys.EFAULT)
	}
	return true, err
}

// fkAttrs are one ioctl's attributes, read and answered in place as the
// kernel does (uverbs_ioctl.c: new handles and fds into data, outputs
// copied to the user pointer and flagged VALID_OUTPUT).
type fkAttrs []abi.Attr

func (a fkAttrs) find(id uint16) *abi.Attr {
	for i := range a {
		if a[i].AttrID == id {
			return &a[i]
		}
	}
	return nil
}

// in is a PTR_IN payload: inline in data up to 8 bytes, else at data.
func (a fkAttrs) in(id uint16) []byte {
	x := a.find(id)
	switch {
	case x == nil:
		return nil
	case x.Len <= 8:
		return unsafe.Slice((*byte)(unsafe.Pointer(&x.Data)), x.Len)
	}
	return unsafe.Slice((*byte)(ptr(x.Data)), x.Len)
}

func (a fkAttrs) u32(id uint16) uint32 {
	if b := a.in(id); len(b) >= 4 {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

// out is a PTR_OUT buffer, flagged written.
func (a fkAttrs) out(id uint16) []byte {
	x := a.find(id)
	if x == nil {
		return nil
	}
	x.Flags |= abi.UVERBS_ATTR_F_VALID_OUTPUT
	return unsafe.Slice((*byte)(ptr(x.Data)), x.Len)
}

func (a fkAttrs) set(id uint16, v uint64) {
	if x := a.find(id); x != nil {
		x.Data = v
	}
}

func le32Bytes(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

// ioctlMethod answers one ioctl method. Callers hold k.mu.
func (k *fakeKernel) ioctlMethod(obj, method uint16, a fkAttrs) error {
	hnd := k.next
	switch [2]uint16{obj, method} {
	case [2]uint16{abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_INVOKE_WRITE}:
		cmd := uint32(a.find(abi.UVERBS_ATTR_WRITE_CMD).Data)
		ext := cmd&abi.IB_USER_VERBS_CMD_FLAG_EXTENDED != 0
		cmd &^= abi.IB_USER_VERBS_CMD_FLAG_EXTENDED
		if a.find(abi.UVERBS_ATTR_CORE_IN) == nil && cmd == abi.IB_USER_VERBS_CMD_QUERY_DEVICE {
			// has_ioctl_write's probe: a kernel with INVOKE_WRITE finds the
			// response buffer missing.
			return sys.NewErrno(sys.ENOSPC)
		}
		k.invoked++
		return k.command(cmd, ext, a.in(abi.UVERBS_ATTR_CORE_IN), a.in(abi.UVERBS_ATTR_UHW_IN),
			a.out(abi.UVERBS_ATTR_CORE_OUT), a.out(abi.UVERBS_ATTR_UHW_OUT))
	case [2]uint16{abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_GET_CONTEXT}:
		copy(a.out(abi.UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS), le32Bytes(1))
		clear(a.out(abi.UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT))
		put(a.out(abi.UVERBS_ATTR_UHW_OUT), k.ctxResp())
	case [2]uint16{abi.UVERBS_OBJECT_ASYNC_EVENT, abi.UVERBS_METHOD_ASYNC_EVENT_ALLOC}:
		r, w, err := sys.Pipe()
		if err != nil {
			return err
		}
		k.asyncW = w
		a.set(abi.UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, uint64(r.Int()))
	case [2]uint16{abi.UVERBS_OBJECT_CQ, abi.UVERBS_METHOD_CQ_CREATE}:
		var flags uint32
		if x := a.find(abi.UVERBS_ATTR_CREATE_CQ_FLAGS); x != nil {
			flags = uint32(x.Data)
		}
		k.cqFlags = append(k.cqFlags, flags)
		copy(a.out(abi.UVERBS_ATTR_CREATE_CQ_RESP_CQE), le32Bytes(a.u32(abi.UVERBS_ATTR_CREATE_CQ_CQE)))
		k.createdCQ(hnd, a.in(abi.UVERBS_ATTR_UHW_IN), a.out(abi.UVERBS_ATTR_UHW_OUT))
		a.set(abi.UVERBS_ATTR_CREATE_CQ_HANDLE, uint64(hnd))
		k.next++
	case [2]uint16{abi.UVERBS_OBJECT_QP, abi.UVERBS_METHOD_QP_CREATE}:
		c := a.in(abi.UVERBS_ATTR_CREATE_QP_CAP)
		if len(c) != int(unsafe.Sizeof(abi.QPCap{})) {
			return sys.NewErrno(sys.EINVAL)
		}
		put(a.out(abi.UVERBS_ATTR_CREATE_QP_RESP_CAP), *(*abi.QPCap)(unsafe.Pointer(&c[0])))
		copy(a.out(abi.UVERBS_ATTR_CREATE_QP_RESP_QP_NUM), le32Bytes(k.qpn))
		k.createdQP(hnd, a.in(abi.UVERBS_ATTR_UHW_IN), a.out(abi.UVERBS_ATTR_UHW_OUT))
		a.set(abi.UVERBS_ATTR_CREATE_QP_HANDLE, uint64(hnd))
		k.next++
	case [2]uint16{abi.UVERBS_OBJECT_SRQ, abi.UVERBS_METHOD_SRQ_CREATE}:
		copy(a.out(abi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR), le32Bytes(a.u32(abi.UVERBS_ATTR_CREATE_SRQ_MAX_WR)))
		copy(a.out(abi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE), le32Bytes(a.u32(abi.UVERBS_ATTR_CREATE_SRQ_MAX_SGE)))
		copy(a.out(abi.UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM), le32Bytes(k.cqn))
		put(a.out(abi.UVERBS_ATTR_UHW_OUT), abi.Mlx5CreateSRQResp{SRQN: k.cqn})
		k.cqn++
		a.set(abi.UVERBS_ATTR_CREATE_SRQ_HANDLE, uint64(hnd))
		k.next++
	case [2]uint16{abi.UVERBS_OBJECT_CQ, abi.UVERBS_METHOD_CQ_DESTROY}:
		clear(a.out(abi.UVERBS_ATTR_DESTROY_CQ_RESP)) // no events reported
	case [2]uint16{abi.UVERBS_OBJECT_QP, abi.UVERBS_METHOD_QP_DESTROY}:
		clear(a.out(abi.UVERBS_ATTR_DESTROY_QP_RESP))
	case [2]uint16{abi.UVERBS_OBJECT_SRQ, abi.UVERBS_METHOD_SRQ_DESTROY}:
		clear(a.out(abi.UVERBS_ATTR_DESTROY_SRQ_RESP))
	case [2]uint16{abi.UVERBS_OBJECT_MR, abi.UVERBS_METHOD_MR_DESTROY}:
		k.deregMR(uint32(a.find(abi.UVERBS_ATTR_DESTROY_MR_HANDLE).Data))
	case [2]uint16{abi.UVERBS_OBJECT_PD, abi.UVERBS_METHOD_PD_DESTROY},
		[2]uint16{abi.UVERBS_OBJECT_AH, abi.UVERBS_METHOD_AH_DESTROY}:
	default:
		// A method this kernel does not have: uverbs falls back to the
		// write command (through INVOKE_WRITE).
		return sys.NewErrno(sys.EPROTONOSUPPORT)
	}
	return nil
}

func (k *fakeKernel) Mmap(raw int, off int64, n, _, _ int) ([]byte, bool, error) {
	if !k.mine(raw) {
		return nil, false, nil
	}
	b, err := sys.MmapAnon(n, 0)
	if err != nil {
		return nil, true, err
	}
	pg := off / int64(sys.Pagesize)
	k.mu.Lock()
	defer k.mu.Unlock()
	if pg>>8&0xff == mmapCmdClockInfo {
		k.clock = b
	} else {
		k.uar[pg] = b
	}
	return b, true, nil
}

// ptr turns a user address from a command into a pointer: in this process
// the "user" memory is ours.
func ptr(addr uint64) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&addr)) }

// put writes a response as copy_to_user would; a buffer too short for it
// makes the command fail with EFAULT, as in the kernel.
func put[T any](out []byte, v T) {
	if len(out) < int(unsafe.Sizeof(v)) {
		efault = true
		return
	}
	*(*T)(unsafe.Pointer(&out[0])) = v
}

// efault records a short response buffer during one Write (under k.mu).
var efault bool

func (k *fakeKernel) Write(raw int, b []byte) (handled bool, err error) {
	if !k.mine(raw) {
		return false, nil
	}
	if len(b) < 8 {
		return true, sys.NewErrno(sys.EINVAL)
	}
	h := (*abi.CmdHdr)(unsafe.Pointer(&b[0]))
	cmd := h.Command
	body := b[8:]
	var out []byte
	ext := false
	if cmd&abi.IB_USER_VERBS_CMD_FLAG_EXTENDED != 0 {
		eh := (*abi.ExCmdHdr)(unsafe.Pointer(&body[0]))
		body = body[unsafe.Sizeof(*eh):]
		cmd &^= abi.IB_USER_VERBS_CMD_FLAG_EXTENDED
		if n := (int(h.OutWords) + int(eh.ProviderOutWords)) * 8; eh.Response != 0 && n > 0 {
			out = unsafe.Slice((*byte)(ptr(eh.Response)), n)
		}
		ext = true
	} else if h.OutWords > 0 {
		out = unsafe.Slice((*byte)(ptr(binary.LittleEndian.Uint64(body))), int(h.OutWords)*4)
	}
	// write(2) carries the driver request after the core one and expects
	// the driver response after the core response.
	var uhwIn, uhwOut []byte
	if n := legacyCoreIn(cmd, ext); n > 0 && len(body) >= n {
		uhwIn = body[n:]
	}
	if n := legacyCoreOut(cmd, ext); len(out) >= n {
		uhwOut = out[n:]
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.writes++
	return true, k.command(cmd, ext, body, uhwIn, out, uhwOut)
}

// legacyCoreIn and legacyCoreOut are the core request and response sizes of
// the write commands whose driver data the fake reads or writes.
func legacyCoreIn(cmd uint32, ext bool) int {
	switch {
	case cmd == abi.IB_USER_VERBS_CMD_CREATE_QP:
		return int(unsafe.Sizeof(abi.CreateQP{}))
	case cmd == abi.IB_USER_VERBS_CMD_CREATE_CQ && ext:
		return int(unsafe.Sizeof(abi.ExCreateCQ{}))
	case cmd == abi.IB_USER_VERBS_CMD_CREATE_CQ:
		return int(unsafe.Sizeof(abi.CreateCQ{}))
	case cmd == abi.IB_USER_VERBS_CMD_RESIZE_CQ:
		return int(unsafe.Sizeof(abi.ResizeCQ{}))
	}
	return 0
}

func legacyCoreOut(cmd uint32, ext bool) int {
	switch {
	case cmd == abi.IB_USER_VERBS_CMD_GET_CONTEXT:
		return int(unsafe.Sizeof(abi.GetContextResp{}))
	case cmd == abi.IB_USER_VERBS_CMD_CREATE_CQ && ext:
		return int(unsafe.Sizeof(abi.ExCreateCQResp{}))
	case cmd == abi.IB_USER_VERBS_CMD_CREATE_CQ:
		return int(unsafe.Sizeof(abi.CreateCQResp{}))
	case cmd == abi.IB_USER_VERBS_CMD_CREATE_QP:
		return int(unsafe.Sizeof(abi.CreateQPResp{}))
	case cmd == abi.IB_USER_VERBS_CMD_CREATE_SRQ:
		return int(unsafe.Sizeof(abi.CreateSRQResp{}))
	case cmd == abi.IB_USER_VERBS_CMD_CREATE_AH:
		return int(unsafe.Sizeof(abi.CreateAHResp{}))
	case cmd == abi.IB_USER_VERBS_CMD_RESIZE_CQ:
		return int(unsafe.Sizeof(abi.ResizeCQResp{}))
	}
	return 0
}

// command answers one write command, from write(2) or INVOKE_WRITE: in is
// the core request, uhwIn the driver request, out and uhwOut the core and
// driver responses. Callers hold k.mu.
func (k *fakeKernel) command(cmd uint32, ext bool, body, uhwIn, out, uhwOut []byte) (err error) {
	k.cmds = append(k.cmds, cmd)
	efault = false
	defer func() {
		if efault && err == nil {
			err = sys.NewErrno(sys.EFAULT)
		}
	}()
	hnd := k.next
	k.next++
	switch cmd {
	case abi.IB_USER_VERBS_CMD_GET_CONTEXT:
		r, w, err := sys.Pipe()
		if err != nil {
			return err
		}
		k.asyncW = w
		put(out, abi.GetContextResp{AsyncFD: uint32(r.Int()), NumCompVectors: 1})
		put(uhwOut, k.ctxResp())
	case abi.IB_USER_VERBS_CMD_QUERY_DEVICE:
		// mlx5_ib_query_device's clock: hca_core_clock from the device
		// (156.25 MHz here), timestamp_mask 2^63-1.
		base := abi.QueryDeviceResp{VendorID: 0x02c9, VendorPartID: 4119, MaxCQE: 1 << 22, MaxQPWR: 1 << 15, PhysPortCnt: 1}
		if ext {
			put(out, abi.ExQueryDeviceResp{Base: base, ResponseLength: uint32(unsafe.Sizeof(abi.ExQueryDeviceResp{})),
				TimestampMask: k.tsMask, HCACoreClock: 156250})
		} else {
			put(out, base)
		}
	case abi.IB_USER_VERBS_CMD_ALLOC_PD:
		put(out, abi.AllocPDResp{PDHandle: hnd})
	case abi.IB_USER_VERBS_CMD_REG_MR:
		in := (*abi.RegMR)(unsafe.Pointer(&body[0]))
		key := 0x1000 + hnd<<8 // lkey == rkey, as the model expects
		k.mrs[hnd] = key
		k.dev.reg(key, unsafe.Slice((*byte)(ptr(in.Start)), in.Length))
		put(out, abi.RegMRResp{MRHandle: hnd, LKey: key, RKey: key})
	case abi.IB_USER_VERBS_CMD_DEREG_MR:
		k.deregMR(binary.LittleEndian.Uint32(body))
	case abi.IB_USER_VERBS_CMD_CREATE_CQ:
		if ext { // EX_CREATE_CQ: the flags (completion timestamps)
			in := (*abi.ExCreateCQ)(unsafe.Pointer(&body[0]))
			k.cqFlags = append(k.cqFlags, in.Flags)
			put(out, abi.ExCreateCQResp{Base: abi.CreateCQResp{CQHandle: hnd, CQE: in.CQE},
				ResponseLength: uint32(unsafe.Sizeof(abi.ExCreateCQResp{}))})
		} else {
			k.cqFlags = append(k.cqFlags, 0)
			in := (*abi.CreateCQ)(unsafe.Pointer(&body[0]))
			put(out, abi.CreateCQResp{CQHandle: hnd, CQE: in.CQE})
		}
		k.createdCQ(hnd, uhwIn, uhwOut)
	case abi.IB_USER_VERBS_CMD_RESIZE_CQ:
		in := (*abi.ResizeCQ)(unsafe.Pointer(&body[0]))
		n, err := k.resizeCQ(in.CQHandle, in.CQE, uhwIn)
		if err != nil {
			return err
		}
		put(out, abi.ResizeCQResp{CQE: n - 1})
	case abi.IB_USER_VERBS_CMD_CREATE_QP:
		in := (*abi.CreateQP)(unsafe.Pointer(&body[0]))
		put(out, abi.CreateQPResp{QPHandle: hnd, QPN: k.qpn, MaxSendWR: in.MaxSendWR, MaxRecvWR: in.MaxRecvWR,
			MaxSendSGE: in.MaxSendSGE, MaxRecvSGE: in.MaxRecvSGE, MaxInlineData: in.MaxInlineData})
		k.createdQP(hnd, uhwIn, uhwOut)
	case abi.IB_USER_VERBS_CMD_QUERY_QP:
		in := (*abi.QueryQP)(unsafe.Pointer(&body[0]))
		put(out, k.queryQP(in.QPHandle))
	case abi.IB_USER_VERBS_CMD_MODIFY_QP:
		in := (*abi.ModifyQP)(unsafe.Pointer(&body[0]))
		if in.AttrMask&uint32(uverbs.QPAttrDestQPN) != 0 {
			k.qpDest[k.handles[in.QPHandle]] = in.DestQPNum
		}
	case abi.IB_USER_VERBS_CMD_QUERY_PORT:
		// One active InfiniBand port, LID 1: AHs need no GID table.
		put(out, abi.QueryPortResp{State: 4, MaxMTU: 5, ActiveMTU: 5, GIDTblLen: 1, PkeyTblLen: 1, LID: 1,
			PhysState: 5, LinkLayer: 1, MaxMsgSz: 1 << 30})
	case abi.IB_USER_VERBS_CMD_CREATE_AH:
		put(out, abi.CreateAHResp{AHHandle: hnd}) // mlx5_ib_create_ah_resp stays zero on IB
	case abi.IB_USER_VERBS_CMD_CREATE_SRQ:
		in := (*abi.CreateSRQ)(unsafe.Pointer(&body[0]))
		put(out, abi.CreateSRQResp{SRQHandle: hnd, MaxWR: in.MaxWR, MaxSGE: in.MaxSGE, SRQN: k.cqn})
		put(uhwOut, abi.Mlx5CreateSRQResp{SRQN: k.cqn})
		k.cqn++
	case abi.IB_USER_VERBS_CMD_DEALLOC_PD, abi.IB_USER_VERBS_CMD_DESTROY_CQ, abi.IB_USER_VERBS_CMD_DESTROY_QP,
		abi.IB_USER_VERBS_CMD_DESTROY_SRQ, abi.IB_USER_VERBS_CMD_DESTROY_AH:
		// out (events reported) stays zero
	default:
		return sys.NewErrno(sys.EOPNOTSUPP)
	}
	return nil
}

// ctxResp is the mlx5 alloc_ucontext response: the vectors' context, the
// clock-info page offered, and the real-time timestamp format if asked.
func (k *fakeKernel) ctxResp() abi.Mlx5AllocUcontextResp {
	resp := *testCtxResp()
	if !k.noClockInfo {
		resp.ClockInfoVersions = 1 << clockInfoV1
	}
	if k.realTime {
		resp.CompMask |= ctxRespRealTimeTS
	}
	return resp
}

func (k *fakeKernel) deregMR(h uint32) { delete(k.dev.mrs, k.mrs[h]) }

// createdCQ records a new CQ's ring address and writes the mlx5 driver
// response (the CQN).
func (k *fakeKernel) createdCQ(hnd uint32, uhwIn, uhwOut []byte) {
	k.cqUHW = append(k.cqUHW, append([]byte(nil), uhwIn...))
	if len(uhwIn) >= 8 {
		k.cqBuf[hnd] = binary.LittleEndian.Uint64(uhwIn)
	}
	put(uhwOut, abi.Mlx5CreateCQResp{CQN: k.cqn})
	k.cqn++
}

// watchCQ tells the fake which provider ring a CQ is, so that RESIZE_CQ
// can act as the HCA on it.
func (k *fakeKernel) watchCQ(c *uverbs.CQ) {
	k.mu.Lock()
	k.rings = append(k.rings, &c.Driver().(*cq).ring)
	k.mu.Unlock()
}

// resizeCQ is mlx5_ib_resize_cq with the HCA's part: the same size is
// answered at once; otherwise the HCA writes a RESIZE_CQ CQE into the old
// ring and continues in the new one the driver request names (the device
// model follows the provider's ring, which the provider switches after
// copying). It returns the new number of entries.
func (k *fakeKernel) resizeCQ(hnd, cqe uint32, uhwIn []byte) (uint32, error) {
	n := roundUpPow2(cqe + 1)
	var ring *cqRing
	for _, r := range k.rings {
		if uint64(uintptr(r.buf)) == k.cqBuf[hnd] {
			ring = r
		}
	}
	if ring == nil {
		return 0, sys.NewErrno(sys.EINVAL) // the test did not watchCQ it
	}
	if n == ring.ncqe {
		return n, nil
	}
	if len(uhwIn) < int(unsafe.Sizeof(abi.Mlx5ResizeCQ{})) {
		return 0, sys.NewErrno(sys.EINVAL)
	}
	req := (*abi.Mlx5ResizeCQ)(unsafe.Pointer(&uhwIn[0]))
	if req.CQESize != cqeSize64 {
		return 0, sys.NewErrno(sys.EINVAL)
	}
	k.dev.writeCQE(ring, func(p unsafe.Pointer) { *(*uint8)(unsafe.Add(p, offOpOwn)) = cqeResizeCQ << 4 })
	k.cqBuf[hnd] = req.BufAddr
	k.resized++
	return n, nil
}

// createdQP records a new QP (its QPN and driver request) and writes the
// mlx5 driver response: the next bfreg.
func (k *fakeKernel) createdQP(hnd uint32, uhwIn, uhwOut []byte) {
	if len(uhwIn) >= int(unsafe.Sizeof(abi.Mlx5CreateQP{})) {
		k.qpReq[hnd] = *(*abi.Mlx5CreateQP)(unsafe.Pointer(&uhwIn[0]))
	}
	put(uhwOut, abi.Mlx5CreateQPResp{BfregIndex: k.bfreg})
	k.handles[hnd] = k.qpn
	k.qpn++
	k.bfreg++
}

// queryQP answers QUERY_QP's sizes as the mlx5 kernel does for a user QP
// (mlx5_ib_query_qp): the receive queue from the driver request (wqe_cnt,
// WQE size / 16), no send sizes (only user space knows them).
func (k *fakeKernel) queryQP(hnd uint32) abi.QueryQPResp {
	r := k.qpReq[hnd]
	resp := abi.QueryQPResp{MaxRecvWR: r.RQWQECount}
	if r.RQWQECount > 0 {
		resp.MaxRecvSGE = (1 << r.RQWQEShift) / dataSegSize
	}
	return resp
}

// attach puts a QP created through uverbs into the device model.
func (k *fakeKernel) attach(t testing.TB, p *uverbs.QP, send, recv *uverbs.CQ) *devQP {
	q := p.Driver().(*qp)
	r := &rig{t: t, rsc: &q.ctx.rsc, qpBuf: q.mem, qpDB: q.sq.dbrec, sq: &q.sq, rq: &q.rq,
		scq: &send.Driver().(*cq).ring, rcq: &recv.Driver().(*cq).ring, lay: q.lay}
	d := k.dev.addQP(r, q.uidx)
	if q.srq != nil {
		d.srq = &q.srq.q
	}
	k.mu.Lock()
	d.peer = k.qpDest[p.QPN()]
	k.mu.Unlock()
	return d
}

// connect moves a and b through INIT, RTR, RTS towards each other.
func connect(t testing.TB, a, b *uverbs.QP) {
	connectTo(t, a, b.QPN())
	connectTo(t, b, a.QPN())
}

// connectTo moves q through INIT, RTR, RTS towards the QP numbered peer.
func connectTo(t testing.TB, q *uverbs.QP, peer uint32) {
	require.NoError(t, q.Modify(&uverbs.QPAttr{State: uverbs.QPStateInit, Port: 1,
		AccessFlags: uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead},
		uverbs.QPAttrState|uverbs.QPAttrPkeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags))
	require.NoError(t, q.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: uverbs.MTU1024, DestQPN: peer,
		AH: uverbs.AHAttr{DLID: 1, Port: 1}, MaxDestRdAtomic: 1, MinRNRTimer: 12},
		uverbs.QPAttrState|uverbs.QPAttrAV|uverbs.QPAttrPathMTU|uverbs.QPAttrDestQPN|uverbs.QPAttrRQPSN|
			uverbs.QPAttrMaxDestRdAtomic|uverbs.QPAttrMinRNRTimer))
	require.NoError(t, q.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
		uverbs.QPAttrState|uverbs.QPAttrTimeout|uverbs.QPAttrRetryCnt|uverbs.QPAttrRNRRetry|uverbs.QPAttrSQPSN|
			uverbs.QPAttrMaxQPRdAtomic))
}
