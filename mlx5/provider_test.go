package mlx5

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/uverbs"
)

// The GET_CONTEXT driver request must be byte-identical to the one the real
// libmlx5 (rdma-core 44.0) sends once the kernel refuses DEVX
// (../shared/vectors/mlx5/eth/commands.jsonl, copied to testdata/).
func TestContextRequestMatchesLibmlx5(t *testing.T) {
	f, err := os.Open("testdata/commands.jsonl")
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

// mlx5 cannot resize a CQ (ring copy not implemented) or an SRQ (the
// kernel refuses max_wr): the request is refused before it is sent, as
// ErrNotSupported, instead of going to the kernel with no driver data.
// Arming the SRQ limit is still sent.
func TestResizeRefusedBeforeSending(t *testing.T) {
	c := testContext()
	defer c.Close()
	d, err := c.NewCQ(&uverbs.CQInitAttr{CQE: 7})
	require.NoError(t, err)
	defer d.Destroy()
	require.ErrorIs(t, d.ResizeData(64).Refuse, uverbs.ErrNotSupported)
	require.ErrorIs(t, d.Resized(nil, nil, nil), uverbs.ErrNotSupported)

	sd, err := c.NewSRQ(&uverbs.SRQInitAttr{MaxWR: 15, MaxSGE: 1})
	require.NoError(t, err)
	defer sd.Destroy()
	a := uverbs.SRQAttr{MaxWR: 64}
	require.ErrorIs(t, sd.ModifyData(&a, uverbs.SRQAttrMaxWR, nil).Refuse, uverbs.ErrNotSupported)
	require.NoError(t, sd.ModifyData(&a, uverbs.SRQAttrLimit, nil).Refuse)
	require.NoError(t, sd.Modified(nil, &a, uverbs.SRQAttrLimit, nil))
}
