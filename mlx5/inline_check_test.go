package mlx5

import (
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/uverbs"
)

// An inline send whose SGE does not lie in memory registered under its lkey
// (an MR with a custom IOVA, another key, past the end) is refused with
// EINVAL and nothing is posted: libmlx5 would memcpy from the address and
// fault the process.
func TestInlineFromUnregisteredMemoryIsEINVAL(t *testing.T) {
	r := benchQP(t, 16)
	payload := make([]byte, 64)
	reg := r.bytesOf(payload)
	r.sq.local = regLocal(payload)
	for name, sgl := range map[string][]uverbs.SGE{
		"unknown address": {{Addr: 0x10000000, Length: 16, LKey: 1}},
		"other key":       {{Addr: reg, Length: 16, LKey: 2}},
		"past the end":    {{Addr: reg + 60, Length: 16, LKey: 1}},
	} {
		head := r.sq.head
		n, err := r.sq.post([]uverbs.SendWR{{Opcode: uverbs.WRSend, Flags: uverbs.SendInline, SGL: sgl}})
		require.ErrorIs(t, err, syscall.EINVAL, name)
		require.Equal(t, 0, n, name)
		require.Equal(t, head, r.sq.head, "%s: nothing posted", name)
	}
	n, err := r.sq.post([]uverbs.SendWR{{Opcode: uverbs.WRSend, Flags: uverbs.SendInline,
		SGL: []uverbs.SGE{{Addr: reg, Length: 64, LKey: 1}}}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// Scatter-to-CQE writes a received payload into the receive WQE's buffers:
// a buffer that is not registered memory completes with a local protection
// error instead of a write through a wild address.
func TestScatterToUnregisteredMemoryIsLocProt(t *testing.T) {
	// Both buffers are longer than what is copied: copyToScat steps its
	// pointers past the last segment, which must stay inside the allocation
	// for the race detector's checkptr.
	data := []byte("0123456789abcdef0123456789abcdef................")
	scat := make([]byte, 2*dataSegSize)
	put32(memPtr(scat), 0, 32)
	put32(memPtr(scat), 4, 9)
	put64(memPtr(scat), 8, 0x10000000)
	refuse := func(uint32, uint64, int) (uint64, []byte) { return 0, nil }
	require.Equal(t, uverbs.WCLocProtErr, copyToScat(refuse, memPtr(scat), memPtr(data), 32, 1))
	dst := make([]byte, 32)
	accept := regLocal(dst)
	require.Equal(t, uverbs.WCLocProtErr, copyToScat(accept, memPtr(scat), memPtr(data), 32, 1), "lkey 9 at 0x10000000")
	put32(memPtr(scat), 4, 1)
	put64(memPtr(scat), 8, uint64(uintptr(memPtr(dst))))
	require.Equal(t, uverbs.WCSuccess, copyToScat(accept, memPtr(scat), memPtr(data), 32, 1))
	require.Equal(t, data[:32], dst)
}

// copyInline copies exactly [0, n) for every size inline data can have,
// from and to unaligned addresses, touching nothing around it.
func TestCopyInline(t *testing.T) {
	src := make([]byte, 300)
	for i := range src {
		src[i] = byte(i*7 + 1)
	}
	for n := 0; n <= 260; n++ {
		for _, off := range []int{0, 1, 4, 13} {
			dst := make([]byte, 300)
			for i := range dst {
				dst[i] = 0xee
			}
			if n > 0 {
				copyInline(unsafe.Pointer(&dst[off+8]), unsafe.Pointer(&src[off]), n)
			}
			want := make([]byte, 300)
			for i := range want {
				want[i] = 0xee
			}
			copy(want[off+8:], src[off:off+n])
			if string(dst) != string(want) {
				t.Fatalf("n=%d off=%d: copy differs", n, off)
			}
		}
	}
}
