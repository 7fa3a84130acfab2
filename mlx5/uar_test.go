package mlx5

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/abi"
	"github.com/ibgo/ibgo/internal/sys"
	"github.com/ibgo/ibgo/uverbs"
)

// The UAR allocation ioctl as rdma-core mlx5_alloc_dyn_uar builds it:
// MLX5_IB_OBJECT_UAR/UAR_OBJ_ALLOC, a new handle, CONST_IN type BF (8
// bytes inline), and PTR_OUT mmap offset (8), length (4), page id (4).
func TestUARAllocCommand(t *testing.T) {
	a, err := sys.NewArena(sys.Pagesize)
	require.NoError(t, err)
	defer a.Close()
	cmd, h, off, length, page := uarAllocCmd(a)
	require.NoError(t, cmd.Err())
	hdr := cmd.Header()
	require.Equal(t, uint16(0x1008), hdr.ObjectID)
	require.Equal(t, uint16(0x1000), hdr.MethodID)
	require.Equal(t, uint32(abi.RDMA_DRIVER_MLX5), hdr.DriverID)
	require.Equal(t, 5, cmd.NumAttrs())
	require.Equal(t, 0, h)
	type want struct{ id, len uint16 }
	for i, w := range []want{{0x1000, 0}, {0x1001, 8}, {0x1002, 8}, {0x1003, 4}, {0x1004, 4}} {
		at := cmd.Attr(i)
		require.Equal(t, w.id, at.AttrID, "attr %d", i)
		require.Equal(t, w.len, at.Len, "attr %d", i)
	}
	require.Equal(t, uint64(0), cmd.Attr(1).Data, "type BF")
	require.Len(t, off, 8)
	require.Len(t, length, 4)
	require.Len(t, page, 4)
}

// Dynamic-UAR QPs name their UAR page and carry MLX5_QP_FLAG_UAR_PAGE_INDEX;
// CQs name the CQ UAR's page with MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX.
func TestDynUARDriverData(t *testing.T) {
	c := &Context{Resp: *testCtxResp(), dynMode: true}
	c.Resp.TotBfregs = 0
	c.cqBF = &bfReg{pageID: 0x21}
	c.freeBF = []*bfReg{{pageID: 0x22, bufSize: 256, uuarn: 1}}
	defer c.Close()
	cq, err := c.NewCQ(&uverbsCQAttr7)
	require.NoError(t, err)
	defer cq.Destroy()
	in := cq.DriverData().In
	require.Equal(t, []byte{0x02, 0x00, 0x21, 0x00}, in[22:26], "flags UAR_PAGE_INDEX, uar_page_index")
	qp, err := c.NewQP(&rcAttr)
	require.NoError(t, err)
	in = qp.DriverData().In
	require.Equal(t, []byte{0x02, 0x04, 0, 0}, in[28:32], "flags SCATTER_CQE|UAR_PAGE_INDEX")
	require.Equal(t, []byte{0x22, 0, 0, 0}, in[36:40], "bfreg_index = page id")
	require.Empty(t, c.freeBF)
	require.NoError(t, qp.Destroy())
	require.Len(t, c.freeBF, 1, "the bfreg returns to the pool")
}

var (
	uverbsCQAttr7 = uverbs.CQInitAttr{CQE: 7}
	rcAttr        = uverbs.QPInitAttr{Type: uverbs.QPTypeRC, Cap: uverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}}
)

// Doorbell records of destroyed QPs, CQs and SRQs are handed out again
// (issue 30, item 9): a context that makes and destroys objects over and
// over keeps one record page.
func TestDoorbellRecordsRecycled(t *testing.T) {
	c := &Context{Resp: *testCtxResp(), dynMode: true}
	c.Resp.TotBfregs = 0
	c.cqBF = &bfReg{pageID: 0x21}
	c.freeBF = []*bfReg{{pageID: 0x22, bufSize: 256, uuarn: 1}}
	defer c.Close()
	for range 300 {
		q, err := c.NewQP(&rcAttr)
		require.NoError(t, err)
		cq, err := c.NewCQ(&uverbsCQAttr7)
		require.NoError(t, err)
		s, err := c.NewSRQ(&uverbs.SRQInitAttr{MaxWR: 8, MaxSGE: 1})
		require.NoError(t, err)
		require.NoError(t, q.Destroy())
		require.NoError(t, cq.Destroy())
		require.NoError(t, s.Destroy())
	}
	require.Len(t, c.dbAll, 1, "900 objects made and destroyed, one record page (64 records)")
}

// Past MaxDedicatedUARs, QPs share the bfregs of one more UAR, each with
// its lock, in turn; a shared bfreg does not go back to the dedicated pool
// (issue 30, item 9).
func TestSharedBfregsPastTheLimit(t *testing.T) {
	old := MaxDedicatedUARs
	MaxDedicatedUARs = 1
	defer func() { MaxDedicatedUARs = old }()
	c := &Context{Resp: *testCtxResp(), dynMode: true, dyn: make([]dynUAR, 2)}
	c.Resp.TotBfregs = 0
	c.cqBF = &bfReg{pageID: 0x21}
	c.shared = []*bfReg{{pageID: 0x30, bufSize: 256, uuarn: 1, lock: new(sync.Mutex)}, {pageID: 0x31, bufSize: 256, uuarn: 1, lock: new(sync.Mutex)}}
	var qps []*qp
	for range 3 {
		d, err := c.NewQP(&rcAttr)
		require.NoError(t, err)
		qps = append(qps, d.(*qp))
	}
	require.Same(t, c.shared[0], qps[0].sq.bf)
	require.Same(t, c.shared[1], qps[1].sq.bf)
	require.Same(t, c.shared[0], qps[2].sq.bf, "in turn")
	for _, q := range qps {
		require.NotNil(t, q.sq.bf.lock, "a shared bfreg is locked on post")
		require.NoError(t, q.Destroy())
	}
	require.Empty(t, c.freeBF, "shared bfregs stay shared")
	c.dyn = nil // no UAR objects to destroy in Close
	require.NoError(t, c.Close())
}
