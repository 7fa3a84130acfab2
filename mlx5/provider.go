package mlx5

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"unsafe"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/mmio"
	"github.com/ibgo/ibgo/internal/sys"
	"github.com/ibgo/ibgo/uverbs"
)

func init() { uverbs.RegisterProvider(provider{}) }

type provider struct{}

func (provider) Name() string     { return "mlx5" }
func (provider) DriverID() uint32 { return abi.RDMA_DRIVER_MLX5 }

func (provider) NewContext(d *uverbs.Device) (uverbs.ProviderContext, error) {
	return &Context{}, nil
}

// Context is mlx5's per-context state: what the kernel said in the
// alloc_ucontext response (UAR layout, CQE version, limits), the mapped UAR
// pages and BlueFlame registers, the doorbell-record pages and the user
// index table that CQ polling resolves QPs through. Its methods are called
// by uverbs under the context's lock; the table and allocators have their
// own lock because CQ polling reads the table without the context lock.
type Context struct {
	Resp abi.Mlx5AllocUcontextResp

	uc     *uverbs.Context
	mu     sync.Mutex
	rsc    rscTable
	fd     *sys.FD
	uars   [][]byte
	bfs    []bfReg
	dbPage []byte // current doorbell-record page
	dbOff  int
	dbAll  [][]byte
	// freeDBs are the records of destroyed objects, handed out again
	// (rdma-core dbrec.c: mlx5_free_db; issue 30, item 9)
	freeDBs []unsafe.Pointer

	dynMode bool     // the kernel gave no static bfregs: UARs are UAR objects
	dyn     []dynUAR // allocated UAR objects
	freeBF  []*bfReg // dedicated bfregs not in use by a QP
	// shared are the bfregs QPs share (with locks) once MaxDedicatedUARs
	// are allocated, handed out in turn (sharedNext)
	shared     []*bfReg
	sharedNext int
	cqBF       *bfReg // the UAR CQs arm through (dynamic mode)

	clockPage []byte  // the kernel's mlx5_ib_clock_info, read-only
	clock     hwClock // reads clockPage (clock.go); Close forgets it before unmapping
}

// Defaults of rdma-core providers/mlx5/mlx5.c: mlx5_alloc_context.
const (
	defTotalBfregs  = 16 // MLX5_DEF_TOT_UUARS
	defLowLatBfregs = 4
	medBfregsThresh = 12 // MLX5_MED_BFREGS_TSHOLD
	bfregsPerUAR    = 4  // MLX5_NUM_BFREGS_PER_UAR
	nonFPBfregs     = 2  // MLX5_NUM_NON_FP_BFREGS_PER_UAR
)

// lowLatBfregs mirrors rdma-core mlx5.c: get_num_low_lat_uuars without
// MLX5_NUM_LOW_LAT_UUARS: the bfregs at the top of a static context that
// each go to one QP.
func lowLatBfregs(tot uint32) uint32 {
	if tot > medBfregsThresh {
		return max(defLowLatBfregs, tot-medBfregsThresh)
	}
	return defLowLatBfregs
}

func (c *Context) request(flags uint32, n int) []byte {
	req := abi.Mlx5AllocUcontextReqV2{
		TotalNumBfregs:      defTotalBfregs,
		NumLowLatencyBfregs: defLowLatBfregs,
		Flags:               flags,
		MaxCQEVersion:       1,
		LibCaps:             abi.MLX5_LIB_CAP_4K_UAR | abi.MLX5_LIB_CAP_DYN_UAR,
	}
	b := make([]byte, unsafe.Sizeof(req))
	*(*abi.Mlx5AllocUcontextReqV2)(unsafe.Pointer(&b[0])) = req
	return b[:n]
}

// ContextRequest mirrors rdma-core providers/mlx5/mlx5.c: mlx5_init_context
// without DEVX: 16 blue-flame registers, 4 low-latency, CQE version 1, 4K UAR
// pages and dynamic UARs.
func (c *Context) ContextRequest() ([]byte, int) {
	return c.request(0, int(unsafe.Sizeof(abi.Mlx5AllocUcontextReqV2{}))), int(unsafe.Sizeof(abi.Mlx5AllocUcontextResp{}))
}

// ContextRequestAttempts is the sequence libmlx5 44 sends GET_CONTEXT's
// driver request in until one succeeds: with MLX5_IB_ALLOC_UCTX_DEVX at the
// full size and then shorter (24, 16 bytes: older kernels know fewer
// fields), then without DEVX. uverbs sends only ContextRequest today; this
// is the list a retry hook would walk (this provider needs no DEVX).
func (c *Context) ContextRequestAttempts() [][]byte {
	return [][]byte{
		c.request(abi.MLX5_IB_ALLOC_UCTX_DEVX, 32),
		c.request(abi.MLX5_IB_ALLOC_UCTX_DEVX, 24),
		c.request(abi.MLX5_IB_ALLOC_UCTX_DEVX, 16),
		c.request(0, 32),
	}
}

// ContextResponse keeps the kernel's answer.
func (c *Context) ContextResponse(out []byte) error {
	if len(out) < int(unsafe.Sizeof(c.Resp)) {
		return errors.New("mlx5: short alloc_ucontext response")
	}
	c.Resp = *(*abi.Mlx5AllocUcontextResp)(unsafe.Pointer(&out[0]))
	if c.Resp.CQEVersion != 1 {
		return fmt.Errorf("%w: mlx5 context with CQE version %d (this provider needs 1)", uverbs.ErrNotSupported, c.Resp.CQEVersion)
	}
	return nil
}

// Opened is uverbs.ContextOpener: uverbs.Open calls it right after
// GET_CONTEXT succeeds. It keeps the context for port queries and maps the
// UARs (see open).
var _ uverbs.ContextOpener = (*Context)(nil)

func (c *Context) Opened(uc *uverbs.Context) error {
	c.uc = uc
	return c.open(uc.CmdFD())
}

// open maps the context's UAR pages, as rdma-core mlx5.c:
// mlx5_init_context does right after GET_CONTEXT: tot_bfregs/2*4 gross
// blue-flame registers in pages of 4 (mmap command REGULAR, index = page),
// write-only and shared. It needs the uverbs command fd, which
// ContextResponse does not get: Opened calls it after GET_CONTEXT. Kernels
// that honour MLX5_LIB_CAP_DYN_UAR return no static bfregs; their UARs come
// from MLX5_IB_OBJECT_UAR per QP (getBfreg, allocDynUAR).
func (c *Context) open(fd *sys.FD) error {
	if !mmio.Supported {
		return fmt.Errorf("%w: mlx5 doorbells need amd64 or arm64 MMIO barriers", uverbs.ErrNotSupported)
	}
	c.fd = fd
	c.mapClockInfo(fd)
	if c.Resp.TotBfregs == 0 {
		// Dynamic UARs (rdma-core: MLX5_CTX_FLAGS_NO_KERN_DYN_UAR unset):
		// CQs arm through one UAR object allocated now, QPs get dedicated
		// bfregs from further ones as they are created.
		c.dynMode = true
		c.mu.Lock()
		bfs, err := c.allocDynUAR()
		c.mu.Unlock()
		if err != nil {
			return err
		}
		c.cqBF, c.freeBF = bfs[0], bfs[1:]
		return nil
	}
	upp := max(c.Resp.NumUARsPerPage, 1)
	gross := c.Resp.TotBfregs / nonFPBfregs * bfregsPerUAR
	pages := int(gross / (bfregsPerUAR * upp))
	for i := 0; i < pages; i++ {
		// pgoff = (index & 0xff) | (cmd << 8) | ((index >> 8) << 16), cmd 0 = REGULAR.
		pgoff := int64(i&0xff) | int64(i>>8)<<16
		m, err := sys.Mmap(fd, pgoff*int64(sys.Pagesize), sys.Pagesize, syscall.PROT_WRITE, syscall.MAP_SHARED)
		if err != nil {
			c.Close()
			return fmt.Errorf("mlx5: mmap UAR page %d: %w", i, err)
		}
		c.uars = append(c.uars, m)
	}
	c.bfs = make([]bfReg, gross)
	for bfi := uint32(0); bfi < gross; bfi++ {
		page := bfi / (bfregsPerUAR * upp)
		j := (bfi / bfregsPerUAR) % upp
		k := bfi % bfregsPerUAR
		b := &c.bfs[bfi]
		b.reg = unsafe.Pointer(&c.uars[page][4096*j+bfOffset+k*c.Resp.BfRegSize])
		b.uuarn = bfi
		if bfi != 0 {
			b.bufSize = uintptr(c.Resp.BfRegSize / 2)
		}
		if needBfregLock(bfi, c.Resp.TotBfregs, lowLatBfregs(c.Resp.TotBfregs)) {
			b.lock = new(sync.Mutex)
		}
	}
	return nil
}

// FormatFWVer mirrors rdma-core providers/mlx5/verbs.c: mlx5_query_device_ex.
func (c *Context) FormatFWVer(raw uint64) string {
	return fmt.Sprintf("%d.%d.%04d", raw>>32&0xffff, raw>>16&0xffff, raw&0xffff)
}

// Close unmaps the UAR and doorbell-record pages.
func (c *Context) Close() error {
	c.clock.forget() // before the page goes: conversions racing with Close report false
	c.mu.Lock()
	defer c.mu.Unlock()
	var first error
	for _, m := range append(append(c.uars, c.dbAll...), c.clockPage) {
		if err := sys.Munmap(m); err != nil && first == nil {
			first = err
		}
	}
	for _, u := range c.dyn {
		if err := sys.Munmap(u.mem); err != nil && first == nil {
			first = err
		}
		if err := c.destroyDynUAR(u.handle); err != nil && first == nil {
			first = err
		}
	}
	c.uars, c.dbAll, c.bfs, c.dbPage, c.dyn, c.freeBF, c.cqBF, c.clockPage, c.freeDBs, c.shared = nil, nil, nil, nil, nil, nil, nil, nil, nil, nil
	return first
}

// allocDB hands out one cache line of a page-aligned anonymous page for a
// doorbell record (rdma-core dbrec.c: mlx5_alloc_dbrec), a destroyed
// object's first.
func (c *Context) allocDB() (unsafe.Pointer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.freeDBs); n > 0 {
		p := c.freeDBs[n-1]
		c.freeDBs = c.freeDBs[:n-1]
		return p, nil
	}
	line := int(max(c.Resp.CacheLineSize, 64))
	if c.dbPage == nil || c.dbOff+line > len(c.dbPage) {
		m, err := sys.MmapAnon(sys.Pagesize, 0)
		if err != nil {
			return nil, fmt.Errorf("mlx5: doorbell record page: %w", err)
		}
		c.dbPage, c.dbOff = m, 0
		c.dbAll = append(c.dbAll, m)
	}
	p := unsafe.Pointer(&c.dbPage[c.dbOff])
	c.dbOff += line
	return p, nil
}

// freeDB takes back a destroyed object's doorbell record (the kernel
// destroyed the object first: the device no longer reads it).
func (c *Context) freeDB(p unsafe.Pointer) {
	if p == nil {
		return
	}
	c.mu.Lock()
	if c.dbAll != nil { // not after Close
		c.freeDBs = append(c.freeDBs, p)
	}
	c.mu.Unlock()
}

func pageRound(n int) int { return (n + sys.Pagesize - 1) &^ (sys.Pagesize - 1) }

func driverBytes[T any](v *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))
}

// NewCQ mirrors rdma-core verbs.c: create_cq for 64-byte CQEs without
// compression.
func (c *Context) NewCQ(attr *uverbs.CQInitAttr) (uverbs.CQDriver, error) {
	if attr.CQE <= 0 || attr.CQE > 1<<24-1 {
		return nil, postErr("create cq", syscall.EINVAL, "cqe %d", attr.CQE)
	}
	if attr.WallClock {
		// uverbs asked WallClockCompletionClock first; this is the
		// provider's own guard, before anything is allocated.
		if _, err := c.WallClockCompletionClock(); err != nil {
			return nil, err
		}
	}
	ncqe := roundUpPow2(uint32(attr.CQE) + 1)
	// libmlx5 asks the kernel for ncqe-1 (the ring's usable size), which is
	// also what the kernel answers and ibv_cq.cqe reports.
	attr.CQE = int(ncqe) - 1
	buf, err := sys.MmapAnon(pageRound(int(ncqe)*cqeSize64), 0)
	if err != nil {
		return nil, fmt.Errorf("mlx5: CQ buffer: %w", err)
	}
	db, err := c.allocDB()
	if err != nil {
		sys.Munmap(buf)
		return nil, err
	}
	q := &cq{ctx: c, mem: buf}
	q.ring = cqRing{buf: unsafe.Pointer(&buf[0]), ncqe: ncqe, dbrec: (*[2]uint32)(db), rsc: &c.rsc}
	*q.ring.dbrec = [2]uint32{}
	q.ring.initCQEs()
	// The HCA writes the completion time into every CQE64; the CQ flag
	// (sent by uverbs) is what the kernel checks. libmlx5 reads it only
	// for IBV_WC_EX_WITH_COMPLETION_TIMESTAMP(_WALLCLOCK), as here.
	q.ring.stamps = attr.Timestamps || attr.WallClock
	q.req = abi.Mlx5CreateCQ{BufAddr: sys.Addr(buf), DBAddr: uint64(uintptr(db)), CQESize: cqeSize64}
	if attr.WallClock {
		// verbs.c: create_cq asks for the real-time format in the driver
		// data; the core flag (IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION,
		// sent by uverbs) alone would give free-running stamps.
		q.req.Flags |= cqFlagRealTimeTS
	}
	if c.cqBF != nil {
		// A page id beyond 16 bits needs MLX5_IB_ATTR_CREATE_CQ_UAR_INDEX,
		// an attribute the uverbs CQ_CREATE does not carry yet.
		if c.cqBF.pageID > 0xffff {
			sys.Munmap(buf)
			return nil, fmt.Errorf("%w: UAR page id %#x needs MLX5_IB_ATTR_CREATE_CQ_UAR_INDEX", uverbs.ErrNotSupported, c.cqBF.pageID)
		}
		q.req.Flags |= cqFlagUARPageIndex
		q.req.UARPageIndex = uint16(c.cqBF.pageID)
	}
	return q, nil
}

// cq is the provider half of a CQ. Poll, ReqNotify and Event are safe to
// call concurrently (one lock per CQ, like libmlx5's cq->lock).
type cq struct {
	ctx  *Context
	mem  []byte
	req  abi.Mlx5CreateCQ
	mu   sync.Mutex
	ring cqRing

	// Between ResizeData and Resized (under mu): the new ring.
	resizeReq abi.Mlx5ResizeCQ
	resizeMem []byte
	resizeN   uint32
}

func (q *cq) DriverData() uverbs.DriverData {
	return uverbs.DriverData{In: driverBytes(&q.req), OutLen: int(unsafe.Sizeof(abi.Mlx5CreateCQResp{}))}
}

func (q *cq) Created(_ *uverbs.CQ, out []byte) error {
	if len(out) < 4 {
		return errors.New("mlx5: short create_cq response")
	}
	q.ring.cqn = (*abi.Mlx5CreateCQResp)(unsafe.Pointer(&out[0])).CQN
	// Without MLX5_IB_CREATE_CQ_FLAG_UAR_PAGE_IDX the kernel arms through
	// the context's first UAR page.
	if q.ctx.cqBF != nil {
		q.ring.uar = q.ctx.cqBF.uarBase
	} else if len(q.ctx.uars) > 0 {
		q.ring.uar = unsafe.Pointer(&q.ctx.uars[0][0])
	}
	return nil
}

// Poll fills wc with up to len(wc) completions. It allocates nothing.
func (q *cq) Poll(wc []uverbs.WC) (int, error) {
	q.mu.Lock()
	n, err := q.ring.poll(wc)
	q.mu.Unlock()
	return n, err
}

// ReqNotify arms the CQ in user space (rdma-core cq.c: mlx5_arm_cq).
func (q *cq) ReqNotify(solicitedOnly bool) error {
	if q.ring.uar == nil {
		return fmt.Errorf("%w: the CQ has no UAR page mapped to arm through", uverbs.ErrNotSupported)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mem == nil {
		// destroyed, by CQ.Close or Context.Close, which destroy under
		// this lock before the doorbell record and UAR pages go: arming
		// now would write to freed or unmapped pages, a fault rather than
		// an error (issue 30, item 3)
		return uverbs.ErrClosed
	}
	q.ring.arm(solicitedOnly)
	return nil
}

var _ interface{ Event() } = (*cq)(nil) // uverbs.CompChannel.GetEvent calls it

// Event must be called for each completion event read for this CQ
// (rdma-core mlx5_cq_event): the next arm carries the next sequence number.
func (q *cq) Event() {
	q.mu.Lock()
	q.ring.event()
	q.mu.Unlock()
}

// ResizeData mirrors the first half of rdma-core verbs.c: mlx5_resize_cq:
// under the CQ's lock (held until Resized, so Poll waits) a new ring of
// roundup_pow2(cqe+1) CQEs, all invalid and hardware-owned, named in the
// driver request (struct mlx5_ib_resize_cq: buf_addr, cqe_size 64). The
// HCA keeps writing the old ring until it writes a RESIZE_CQ CQE there,
// then continues in the new one. For the same size libmlx5 sends nothing;
// here the command goes out with the current ring, which the kernel
// answers at once without touching it (mlx5_ib_resize_cq: entries ==
// cqe+1 returns 0), because uverbs has no "nothing to send" answer.
func (q *cq) ResizeData(cqe int) uverbs.DriverData {
	q.mu.Lock() // released by Resized, always
	if q.mem == nil {
		return uverbs.DriverData{Refuse: uverbs.ErrClosed}
	}
	if cqe <= 0 || cqe > 1<<24-1 {
		return uverbs.DriverData{Refuse: postErr("resize cq", syscall.EINVAL, "cqe %d", cqe)}
	}
	ncqe := roundUpPow2(uint32(cqe) + 1)
	q.resizeReq = abi.Mlx5ResizeCQ{BufAddr: sys.Addr(q.mem), CQESize: cqeSize64}
	if ncqe == q.ring.ncqe {
		return uverbs.DriverData{In: driverBytes(&q.resizeReq)}
	}
	buf, err := sys.MmapAnon(pageRound(int(ncqe)*cqeSize64), 0)
	if err != nil {
		return uverbs.DriverData{Refuse: fmt.Errorf("mlx5: CQ resize buffer: %w", err)}
	}
	q.resizeMem, q.resizeN = buf, ncqe
	(&cqRing{buf: unsafe.Pointer(&buf[0]), ncqe: ncqe}).initCQEs()
	q.resizeReq.BufAddr = sys.Addr(buf)
	return uverbs.DriverData{In: driverBytes(&q.resizeReq)}
}

// Resized mirrors the second half of mlx5_resize_cq: after the kernel
// accepted, the unpolled CQEs move to the new ring
// (mlx5_cq_resize_copy_cqes) and the old one is freed; on error the new
// one is. Either way the CQ's lock is released.
func (q *cq) Resized(_ *uverbs.CQ, _ []byte, err error) error {
	defer q.mu.Unlock()
	nb, n := q.resizeMem, q.resizeN
	q.resizeMem, q.resizeN = nil, 0
	if err != nil || nb == nil {
		if nb != nil {
			sys.Munmap(nb)
		}
		return err
	}
	cerr := q.ring.resizeCopy(unsafe.Pointer(&nb[0]), n)
	// Like libmlx5, the new ring is used even when the copy went wrong:
	// the HCA writes there now.
	old := q.mem
	q.mem, q.ring.buf, q.ring.ncqe = nb, unsafe.Pointer(&nb[0]), n
	if err := sys.Munmap(old); err != nil && cerr == nil {
		cerr = err
	}
	return cerr
}

func (q *cq) Destroy() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mem == nil {
		return nil
	}
	m := q.mem
	q.mem, q.ring.buf = nil, nil
	q.ctx.freeDB(unsafe.Pointer(q.ring.dbrec))
	return sys.Munmap(m)
}
