package mlx5

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/uverbs"
)

// TestSRQDoorbellCounter16Bits: the SRQ doorbell record carries a 16-bit
// counter (libmlx5's srq->counter is a uint16_t; bits 31:16 of the record
// are reserved), so it wraps to 0 after 65,535 instead of carrying into
// the reserved bits (issue 30, item 8).
func TestSRQDoorbellCounter16Bits(t *testing.T) {
	const max, shift = 4, 6 // 64-byte WQEs: next segment and 3 data segments
	mem := make([]byte, max<<shift)
	db := new(uint32)
	s := &srqQueue{buf: unsafe.Pointer(&mem[0]), wrid: make([]uint64, max), max: max, maxGS: 3, shift: shift, dbrec: db}
	s.init()
	s.count = 0xfffe
	wrs := make([]uverbs.RecvWR, 3)
	for i := range wrs {
		wrs[i] = uverbs.RecvWR{WRID: uint64(i), SGL: []uverbs.SGE{{Addr: 0x1000, Length: 64, LKey: 7}}}
	}
	n, err := s.post(wrs)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, be32(1), *db, "0xfffe + 3 wraps to 1 in 16 bits; nothing in the reserved bits")
}
