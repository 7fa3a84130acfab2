package sys

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/abi"
)

// written runs ExecWrite into a pipe and returns the bytes the kernel would
// have read.
func written(t *testing.T, a *Arena, c *WriteCommand) ([]byte, error) {
	t.Helper()
	r, w, err := Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	if err := ExecWrite(w, a, c); err != nil {
		return nil, err
	}
	buf := make([]byte, 4096)
	n, err := Read(r, buf)
	require.NoError(t, err)
	return buf[:n], nil
}

func fill(b []byte, v byte) []byte {
	for i := range b {
		b[i] = v + byte(i)
	}
	return b
}

func TestExecWriteLegacyLayout(t *testing.T) {
	a := newTestArena(t, 4096)
	// A command with a response: the u64 response field leads CoreIn.
	in := fill(a.Alloc(16), 0x10)
	uin := fill(a.Alloc(8), 0x40)
	out := a.Alloc(24)
	uout := a.Alloc(8) // contiguous with out
	got, err := written(t, a, &WriteCommand{Cmd: 3, CoreIn: in, UHWIn: uin, CoreOut: out, UHWOut: uout})
	require.NoError(t, err)
	want := []byte{3, 0, 0, 0, 0, 0, 0, 0}
	binary.LittleEndian.PutUint16(want[4:], (8+16+8)/4) // in_words counts the header
	binary.LittleEndian.PutUint16(want[6:], (24+8)/4)   // out_words: core + driver response
	resp := make([]byte, 8)
	binary.LittleEndian.PutUint64(resp, Addr(out))
	want = append(want, resp...)
	want = append(want, in[8:]...)
	want = append(want, uin...)
	require.Equal(t, want, got)

	// No response: CoreIn goes as is, out_words is 0.
	a.Reset()
	in = fill(a.Alloc(4), 1)
	got, err = written(t, a, &WriteCommand{Cmd: 9, CoreIn: in})
	require.NoError(t, err)
	require.Equal(t, []byte{9, 0, 0, 0, 3, 0, 0, 0, 1, 2, 3, 4}, got)

	// Only a driver response: the response address is the driver buffer.
	a.Reset()
	in = a.Alloc(8)
	uout = a.Alloc(4)
	got, err = written(t, a, &WriteCommand{Cmd: 1, CoreIn: in, UHWOut: uout})
	require.NoError(t, err)
	require.Equal(t, Addr(uout), binary.LittleEndian.Uint64(got[8:]))
}

func TestExecWriteExtendedLayout(t *testing.T) {
	a := newTestArena(t, 4096)
	in := fill(a.Alloc(16), 0x20)
	uin := fill(a.Alloc(8), 0x50)
	out := a.Alloc(16)
	uout := a.Alloc(8)
	got, err := written(t, a, &WriteCommand{Cmd: 2, Extended: true, CoreIn: in, UHWIn: uin, CoreOut: out, UHWOut: uout})
	require.NoError(t, err)
	want := make([]byte, 8+16)
	binary.LittleEndian.PutUint32(want[0:], 2|abi.IB_USER_VERBS_CMD_FLAG_EXTENDED)
	binary.LittleEndian.PutUint16(want[4:], 16/8) // core in words, without headers
	binary.LittleEndian.PutUint16(want[6:], 16/8) // core out words
	binary.LittleEndian.PutUint64(want[8:], Addr(out))
	binary.LittleEndian.PutUint16(want[16:], 8/8) // provider in words
	binary.LittleEndian.PutUint16(want[18:], 8/8) // provider out words
	want = append(want, in...)
	want = append(want, uin...)
	require.Equal(t, want, got)
}

func TestExecWriteSizeChecks(t *testing.T) {
	a := newTestArena(t, 1<<20)
	cases := map[string]*WriteCommand{
		"legacy not multiple of 4":   {Cmd: 1, CoreIn: a.Alloc(6)},
		"legacy response not x4":     {Cmd: 1, CoreIn: a.Alloc(8), CoreOut: a.Alloc(6)},
		"response without the field": {Cmd: 1, CoreIn: a.Alloc(4), CoreOut: a.Alloc(4)},
		"legacy over u16 words":      {Cmd: 1, CoreIn: a.Alloc(4 * 0x10000)},
		"extended not multiple of 8": {Cmd: 1, Extended: true, CoreIn: a.Alloc(4)},
		"extended over u16 words":    {Cmd: 1, Extended: true, CoreIn: a.Alloc(8 * 0x10000)},
		"responses not contiguous":   {Cmd: 1, CoreIn: a.Alloc(8), CoreOut: a.Alloc(4), UHWOut: func() []byte { a.Alloc(8); return a.Alloc(8) }()},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := written(t, a, c)
			require.Error(t, err)
		})
	}
	full := newTestArena(t, 1)
	in := full.Alloc(Pagesize)
	_, err := written(t, full, &WriteCommand{Cmd: 1, CoreIn: in})
	require.ErrorIs(t, err, ErrArenaFull)
}

func TestWriteClosedFD(t *testing.T) {
	a := newTestArena(t, 4096)
	r, w, err := Pipe()
	require.NoError(t, err)
	r.Close()
	w.Close()
	b, _ := a.AllocBuf(8)
	require.ErrorIs(t, Write(w, b), EBADF)
	require.NoError(t, Write(w, Buf{}), "empty writes nothing")
}

// WriteRaw (the rxe doorbell's write) sends the whole Buf, like Write,
// returns the kernel's errno, and refuses a closed descriptor.
func TestWriteRaw(t *testing.T) {
	r, w, err := Pipe()
	require.NoError(t, err)
	defer r.Close()
	a, err := NewArena(Pagesize)
	require.NoError(t, err)
	defer a.Close()
	b, ok := a.AllocBuf(24)
	require.True(t, ok)
	for i := range b.Bytes() {
		b.Bytes()[i] = byte(i + 1)
	}
	require.NoError(t, WriteRaw(w, b))
	got := make([]byte, 64)
	n, err := Read(r, got)
	require.NoError(t, err)
	require.Equal(t, b.Bytes(), got[:n])
	// The kernel's own refusal comes back as its errno, through the direct
	// call (the read end of a pipe is open but not writable).
	require.ErrorIs(t, WriteRaw(r, b), EBADF)
	require.NoError(t, w.Close())
	require.ErrorIs(t, WriteRaw(w, b), EBADF)
	require.NoError(t, WriteRaw(w, Buf{}), "an empty Buf is no call")
}
