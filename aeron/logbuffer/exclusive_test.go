package logbuffer

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/protocol"
	"github.com/ibgo/ibgo/internal/shm"
)

func TestExclusiveAppenderWritesWhatReadersRead(t *testing.T) {
	const termLength = 64 << 10
	l, err := New(shm.Alloc(int(ComputeLogLength(termLength, 4096))), termLength, 4096)
	require.NoError(t, err)
	l.Metadata().StoreDefaultDataHeader(7, 9, 100)
	l.Metadata().InitialiseTailWithTermID(0, 100)
	hw, err := NewHeaderWriter(l.Metadata().DefaultFrameHeader())
	require.NoError(t, err)
	a := NewExclusiveTermAppender(l, 0)

	off := a.AppendUnfragmentedMessage(&hw, 100, 0, []byte("hello"))
	require.Equal(t, int32(64), off)
	require.Equal(t, PackTail(100, 64), l.Metadata().RawTailVolatile(0), "tail published with an ordered store")
	big := bytes.Repeat([]byte{'x'}, 3000)
	off2, err := a.AppendFragmentedMessage(&hw, 100, off, big, 1376)
	require.NoError(t, err)
	var claim BufferClaim
	off3 := a.Claim(&hw, 100, off2, 10, &claim)
	copy(claim.Buffer(), "claimed!!!")
	claim.Commit()

	var got [][]byte
	var flags []uint8
	h := NewHeader(100, termLength)
	n, end, err := Read(l.Term(0), 0, func(p []byte, hd *Header) {
		got = append(got, bytes.Clone(p))
		flags = append(flags, hd.Flags())
	}, 100, &h)
	require.NoError(t, err)
	require.Equal(t, off3, end)
	require.Equal(t, 5, n)
	require.Equal(t, []byte("hello"), got[0])
	require.Equal(t, big, append(append(got[1], got[2]...), got[3]...))
	require.Equal(t, []uint8{protocol.FlagsUnfragmented, protocol.FlagBegin, 0, protocol.FlagEnd, protocol.FlagsUnfragmented}, flags)
	require.Equal(t, []byte("claimed!!!"), got[4])

	// A frame that does not fit pads the rest of the term and fails.
	require.Equal(t, AppendFailed, a.AppendUnfragmentedMessage(&hw, 100, termLength-32, make([]byte, 100)))
	require.True(t, IsPaddingFrame(l.Term(0), termLength-32))
	require.Equal(t, int32(32), FrameLengthVolatile(l.Term(0), termLength-32))
	_, err = a.AppendFragmentedMessage(&hw, 100, 0, big, 1000)
	require.Error(t, err, "max payload not a multiple of 32")
}
