package mlx5

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/sys"
	"github.com/ibgo/ibgo/uverbs"
)

// open maps the static UAR pages at index*PAGE_SIZE of the command fd (a
// plain file stands in for /dev/infiniband/uverbsN here) and lays the
// bfregs out as libmlx5 does: gross index 24 is page 6 + 0x800, 25 is page
// 6 + 0xa00, 29 is page 7 + 0xa00 (the vectors' QPs), bfreg 0 has no
// BlueFlame buffer. A QP posting through bfreg 29 writes that file offset.
func TestOpenMapsStaticUARs(t *testing.T) {
	if sys.Pagesize != 4096 {
		t.Skip("the expected offsets assume 4 KiB pages")
	}
	path := filepath.Join(t.TempDir(), "uverbs0")
	require.NoError(t, os.WriteFile(path, make([]byte, 8*4096), 0o600))
	fd, err := sys.Open(path, syscall.O_RDWR)
	require.NoError(t, err)
	defer fd.Close()
	c := &Context{Resp: *testCtxResp()}
	require.NoError(t, c.open(fd))
	defer c.Close()
	require.Len(t, c.uars, 8)
	require.Len(t, c.bfs, 32)
	require.Equal(t, uintptr(0), c.bfs[0].bufSize)
	for _, b := range []struct {
		bfi  int
		page int
		off  uintptr
	}{{24, 6, 0x800}, {25, 6, 0xa00}, {28, 7, 0x800}, {29, 7, 0xa00}} {
		require.Equal(t, memPtr(c.uars[b.page][b.off:]), c.bfs[b.bfi].reg, "bfreg %d", b.bfi)
		require.Equal(t, uintptr(256), c.bfs[b.bfi].bufSize)
	}

	attr := uverbs.QPInitAttr{Type: uverbs.QPTypeRC, Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}
	d, err := c.NewQP(&attr)
	require.NoError(t, err)
	defer d.Destroy()
	q := d.(*qp)
	q.sq.bf = &c.bfs[29] // what Created takes from create_qp's response
	q.sq.qpn = 0x1a3
	_, err = q.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRRDMAWrite, RemoteAddr: 0x1000, RKey: 5,
		SGL: []uverbs.SGE{{Addr: 0x2000, Length: 8, LKey: 6}}}})
	require.NoError(t, err)
	// ds = 3 (ctrl, raddr, data): a BlueFlame copy of one 64-byte chunk.
	file, err := os.ReadFile(path)
	require.NoError(t, err)
	at := 7*4096 + 0xa00
	require.Equal(t, []byte{0, 0, 0, 0x08, 0, 0x01, 0xa3, 0x03}, file[at:at+8], "ctrl: opcode, qpn<<8|ds")
	require.Equal(t, []byte{0, 0, 0, 0, 0, 0, 0x10, 0x00}, file[at+16:at+24], "raddr")
}
