package mlx5

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/sys"
	"github.com/ibgo/ibgo/uverbs"
)

// The GET_CONTEXT driver request must be byte-identical to the one the real
// libmlx5 (rdma-core 44.0) sends once the kernel refuses DEVX
// (testdata/vectors/eth/commands.jsonl).
func TestContextRequestMatchesLibmlx5(t *testing.T) {
	f, err := os.Open("testdata/vectors/eth/commands.jsonl")
	require.NoError(t, err)
	defer f.Close()
	type attr struct {
		ID      string `json:"id"`
		Payload string `json:"payload"`
	}
	type ev struct {
		Name   string `json:"name"`
		Errno  int    `json:"errno"`
		Before []attr `json:"attrs_before"`
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var want []byte
	for sc.Scan() {
		var e ev
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e))
		if e.Name == "GET_CONTEXT" && e.Errno == 0 {
			for _, a := range e.Before {
				if a.ID == "0x1000" {
					want, err = hex.DecodeString(a.Payload)
					require.NoError(t, err)
				}
			}
			break
		}
	}
	require.NotNil(t, want, "no successful GET_CONTEXT in the vector")
	got, outLen := (&Context{}).ContextRequest()
	require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(got))
	require.Equal(t, 72, outLen)
}

func TestFormatFWVer(t *testing.T) {
	// 20.35.1012 as the kernel packs it: major<<32 | minor<<16 | sub.
	require.Equal(t, "20.35.1012", (&Context{}).FormatFWVer(20<<32|35<<16|1012))
	require.Equal(t, "16.0.0042", (&Context{}).FormatFWVer(16<<32|42))
}

// mlx5 cannot resize an SRQ (the kernel refuses max_wr): the request is
// refused before it is sent, as ErrNotSupported, instead of going to the
// kernel. Arming the SRQ limit is still sent. A CQ resize request names a
// new ring of 64-byte CQEs (struct mlx5_ib_resize_cq); a failed command
// frees it and releases the CQ.
func TestResizeDriverData(t *testing.T) {
	c := testContext()
	defer c.Close()
	d, err := c.NewCQ(&uverbs.CQInitAttr{CQE: 7})
	require.NoError(t, err)
	defer d.Destroy()
	dd := d.ResizeData(64)
	require.NoError(t, dd.Refuse)
	require.Len(t, dd.In, 16)
	q := d.(*cq)
	require.Equal(t, uint32(128), q.resizeN)
	require.Equal(t, uint64(uintptr(unsafe.Pointer(&q.resizeMem[0]))), binary.LittleEndian.Uint64(dd.In))
	require.Equal(t, uint16(64), binary.LittleEndian.Uint16(dd.In[8:]))
	require.ErrorIs(t, d.Resized(nil, nil, sys.NewErrno(sys.ENOMEM)), sys.ENOMEM)
	require.Nil(t, q.resizeMem, "the new ring is freed")
	require.Equal(t, uint32(8), q.ring.ncqe, "the old ring stays")
	require.True(t, q.mu.TryLock(), "Resized released the CQ")
	q.mu.Unlock()
	dd = d.ResizeData(0)
	require.ErrorIs(t, dd.Refuse, sys.EINVAL)
	require.ErrorIs(t, d.Resized(nil, nil, dd.Refuse), sys.EINVAL)

	sd, err := c.NewSRQ(&uverbs.SRQInitAttr{MaxWR: 15, MaxSGE: 1})
	require.NoError(t, err)
	defer sd.Destroy()
	a := uverbs.SRQAttr{MaxWR: 64}
	require.ErrorIs(t, sd.ModifyData(&a, uverbs.SRQAttrMaxWR, nil).Refuse, uverbs.ErrNotSupported)
	require.NoError(t, sd.ModifyData(&a, uverbs.SRQAttrLimit, nil).Refuse)
	require.NoError(t, sd.Modified(nil, &a, uverbs.SRQAttrLimit, nil))
}
