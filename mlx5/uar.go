package mlx5

import (
	"encoding/binary"
	"fmt"
	"sync"
	"syscall"
	"unsafe"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
)

// rdma/mlx5_user_ioctl_cmds.h and mlx5_user_ioctl_verbs.h: the UAR object
// of kernels with dynamic UARs (MLX5_LIB_CAP_DYN_UAR honoured, tot_bfregs 0).
const (
	objUAR             = 0x1008 // MLX5_IB_OBJECT_UAR
	methUARAlloc       = 0x1000 // MLX5_IB_METHOD_UAR_OBJ_ALLOC
	methUARDestroy     = 0x1001 // MLX5_IB_METHOD_UAR_OBJ_DESTROY
	attrUARHandle      = 0x1000 // MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE (also DESTROY_HANDLE)
	attrUARType        = 0x1001 // MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE
	attrUARMmapOffset  = 0x1002 // MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET
	attrUARMmapLength  = 0x1003 // MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH
	attrUARPageID      = 0x1004 // MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID
	uarAllocTypeBF     = 0      // MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF
	cqFlagUARPageIndex = 1 << 1 // MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX
	qpFlagUARPageIndex = 1 << 10
	adapterPageSize    = 4096 // MLX5_ADAPTER_PAGE_SIZE
)

// dynUAR is one UAR object the kernel allocated and we mapped.
type dynUAR struct {
	handle uint32
	pageID uint32
	mem    []byte
}

// uarAllocCmd builds MLX5_IB_METHOD_UAR_OBJ_ALLOC as rdma-core verbs.c:
// mlx5_alloc_dyn_uar does: new handle, type BF, and three outputs.
func uarAllocCmd(a *sys.Arena) (cmd *sys.IoctlCmd, h int, off, length, page []byte) {
	cmd = sys.NewIoctl(a, objUAR, methUARAlloc, abi.RDMA_DRIVER_MLX5)
	h = cmd.NewIDR(attrUARHandle)
	cmd.Const(attrUARType, uarAllocTypeBF)
	off = cmd.PtrOut(attrUARMmapOffset, 8)
	length = cmd.PtrOut(attrUARMmapLength, 4)
	page = cmd.PtrOut(attrUARPageID, 4)
	return
}

// allocDynUAR allocates and maps a BlueFlame UAR and returns its bfregs
// (rdma-core mlx5_alloc_dyn_uar + mlx5_insert_dyn_uuars): two per 4 KiB
// UAR, at +0x800 and +0x800+bf_reg_size, each with its UAR's page id.
// Called with c.mu held.
func (c *Context) allocDynUAR() ([]*bfReg, error) {
	if c.fd == nil {
		return nil, fmt.Errorf("mlx5: no command fd for UAR allocation")
	}
	a, err := sys.NewArena(sys.Pagesize)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	cmd, h, offB, lenB, pageB := uarAllocCmd(a)
	if err := cmd.Exec(c.fd); err != nil {
		return nil, fmt.Errorf("mlx5: allocate a UAR: %w", err)
	}
	u := dynUAR{handle: uint32(cmd.Data(h)), pageID: binary.LittleEndian.Uint32(pageB)}
	off := int64(binary.LittleEndian.Uint64(offB))
	length := int(binary.LittleEndian.Uint32(lenB))
	u.mem, err = sys.Mmap(c.fd, off, length, syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		c.destroyDynUAR(u.handle)
		return nil, fmt.Errorf("mlx5: mmap UAR (offset %#x, %d bytes): %w", off, length, err)
	}
	c.dyn = append(c.dyn, u)
	upp := max(c.Resp.NumUARsPerPage, 1)
	var out []*bfReg
	for j := uint32(0); j < upp*nonFPBfregs; j++ {
		inPage, inUAR := j/nonFPBfregs, j%nonFPBfregs
		out = append(out, &bfReg{
			reg:     unsafe.Pointer(&u.mem[inPage*adapterPageSize+bfOffset+inUAR*c.Resp.BfRegSize]),
			bufSize: uintptr(c.Resp.BfRegSize / 2),
			uuarn:   1, // non-zero: BlueFlame-capable
			pageID:  u.pageID + inPage,
			uarBase: unsafe.Pointer(&u.mem[inPage*adapterPageSize]),
		})
	}
	return out, nil
}

func (c *Context) destroyDynUAR(handle uint32) error {
	a, err := sys.NewArena(sys.Pagesize)
	if err != nil {
		return err
	}
	defer a.Close()
	cmd := sys.NewIoctl(a, objUAR, methUARDestroy, abi.RDMA_DRIVER_MLX5)
	cmd.IDR(attrUARHandle, handle)
	return cmd.Exec(c.fd)
}

// MaxDedicatedUARs bounds the UARs a context allocates for QPs of their
// own (two bfregs each): past it, or when the device has no more UARs, new
// QPs share the bfregs of one more UAR under a lock, as libmlx5 falls back
// to shared bfregs, instead of exhausting the device's UARs and the
// process's mappings (issue 30, item 9). Set it before opening a context.
var MaxDedicatedUARs = 512

// getBfreg returns a bfreg for a new QP. Static bfregs: nil (the kernel
// picks one and create_qp's response names it). Dynamic UARs: a dedicated
// bfreg (no lock needed on post), allocating UARs as needed up to
// MaxDedicatedUARs, then a shared one.
func (c *Context) getBfreg() (*bfReg, error) {
	if !c.dynMode {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.freeBF) == 0 {
		if len(c.dyn) >= MaxDedicatedUARs+1 { // +1: the CQs' UAR
			return c.sharedBfregLocked()
		}
		bfs, err := c.allocDynUAR()
		if err != nil {
			if len(c.shared) > 0 {
				return c.sharedBfregLocked() // the device is out of UARs
			}
			return nil, err
		}
		c.freeBF = append(c.freeBF, bfs...)
	}
	b := c.freeBF[0]
	c.freeBF = c.freeBF[1:]
	return b, nil
}

// sharedBfregLocked hands out the shared bfregs in turn, allocating their
// UAR the first time; each has a lock, which every post through it takes
// around the doorbell (sendQueue.ring). Called with c.mu held.
func (c *Context) sharedBfregLocked() (*bfReg, error) {
	if len(c.shared) == 0 {
		bfs, err := c.allocDynUAR()
		if err != nil {
			return nil, fmt.Errorf("mlx5: a UAR for shared bfregs: %w", err)
		}
		for _, b := range bfs {
			b.lock = new(sync.Mutex)
		}
		c.shared = bfs
	}
	b := c.shared[c.sharedNext%len(c.shared)]
	c.sharedNext++
	return b, nil
}

func (c *Context) putBfreg(b *bfReg) {
	if b == nil || !c.dynMode || b.lock != nil { // a shared one stays shared
		return
	}
	c.mu.Lock()
	b.offset = 0
	c.freeBF = append(c.freeBF, b)
	c.mu.Unlock()
}
