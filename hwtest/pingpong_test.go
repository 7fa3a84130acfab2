package hwtest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/testutil"
	"github.com/ibgo/ibgo/uverbs"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// The out-of-band line is byte-compatible with pingpong.c (52 bytes, NUL
// terminated, GID as 32 hex digits in wire order).
func TestPingPongDestEncoding(t *testing.T) {
	g, err := uverbs.ParseGID("::ffff:10.0.0.1")
	require.NoError(t, err)
	e := uverbs.Endpoint{LID: 0, QPN: 0x11, PSN: 0xabcdef, GID: g}
	b := encodeDest(e)
	require.Len(t, b, 52)
	require.Equal(t, "0000:000011:abcdef:00000000000000000000ffff0a000001\x00", string(b))
	back, err := decodeDest(b)
	require.NoError(t, err)
	require.Equal(t, e, back)
	for _, bad := range []string{"", "0000:11:22", "zzzz:000011:abcdef:00000000000000000000ffff0a000001", "0000:000011:abcdef:00ff"} {
		_, err := decodeDest([]byte(bad))
		require.Error(t, err, bad)
	}
}

func FuzzPingPongDest(f *testing.F) {
	f.Add([]byte("0000:000011:abcdef:00000000000000000000ffff0a000001\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeDest(b)
		if err != nil {
			return
		}
		back, err := decodeDest(encodeDest(e))
		require.NoError(t, err)
		require.Equal(t, e, back)
	})
}

// The suite links every provider (providers.go), so a ConnectX host and an
// rxe host both find theirs.
func TestEveryProviderLinked(t *testing.T) {
	require.Equal(t, []string{"mlx5", "rxe"}, uverbs.Providers())
}
