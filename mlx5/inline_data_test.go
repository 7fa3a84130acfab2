package mlx5

import (
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/uverbs"
)

// uverbs.SendWR.InlineData (the extended API's ibv_wr_set_inline_data)
// builds the same WQEs, byte for byte and across the ring's wrap, as the
// same bytes posted inline from an SGE in registered memory.
func TestInlineDataMatchesInlineSGE(t *testing.T) {
	viaSGE, viaData := benchQP(t, 16), benchQP(t, 16)
	payload := make([]byte, 64)
	for i := range payload {
		payload[i] = byte(i*5 + 1)
	}
	reg := viaSGE.bytesOf(payload)
	viaSGE.sq.local = regLocal(payload)
	ring := func(r *rig) []byte { return unsafe.Slice((*byte)(r.sq.buf), int(r.sq.wqeCnt)*sendWQEBB) }
	for i := 0; i < 40; i++ {
		n := []int{0, 1, 12, 13, 44, 60, 64}[i%7]
		a, err := viaSGE.sq.post([]uverbs.SendWR{{WRID: uint64(i), Opcode: uverbs.WRSendWithImm, Imm: uint32(i),
			Flags: uverbs.SendInline | uverbs.SendSignaled, SGL: []uverbs.SGE{{Addr: reg, Length: uint32(n), LKey: 1}}}})
		require.NoError(t, err)
		b, err := viaData.sq.post([]uverbs.SendWR{{WRID: uint64(i), Opcode: uverbs.WRSendWithImm, Imm: uint32(i),
			Flags: uverbs.SendInline | uverbs.SendSignaled, InlineData: payload[:n]}})
		require.NoError(t, err)
		require.Equal(t, a, b)
		require.Equal(t, ring(viaSGE), ring(viaData), "post %d (%d bytes)", i, n)
		require.Equal(t, viaSGE.sq.curPost, viaData.sq.curPost)
		for _, r := range []*rig{viaSGE, viaData} {
			r.sq.tail.Store(r.sq.head)
		}
	}
	_, err := viaData.sq.post([]uverbs.SendWR{{Opcode: uverbs.WRSend, InlineData: make([]byte, viaData.sq.maxInline+1)}})
	require.ErrorIs(t, err, syscall.ENOMEM, "longer than max_inline_data")
}

func TestMlx5SupportedSendOps(t *testing.T) {
	c := &Context{}
	require.Zero(t, c.SupportedSendOps(uverbs.QPTypeRC)&(uverbs.SendOpFlush|uverbs.SendOpAtomicWrite),
		"FLUSH and ATOMIC_WRITE are not in ibgo's mlx5 builder")
	for op := uverbs.SendOps(1); op <= uverbs.SendOpAtomicWrite; op <<= 1 {
		if c.SupportedSendOps(uverbs.QPTypeRC)&op == 0 {
			continue
		}
		// Everything advertised has an mlx5 opcode.
		var wro uverbs.WROpcode
		switch op {
		case uverbs.SendOpRDMAWrite:
			wro = uverbs.WRRDMAWrite
		case uverbs.SendOpRDMAWriteWithImm:
			wro = uverbs.WRRDMAWriteWithImm
		case uverbs.SendOpSend:
			wro = uverbs.WRSend
		case uverbs.SendOpSendWithImm:
			wro = uverbs.WRSendWithImm
		case uverbs.SendOpRDMARead:
			wro = uverbs.WRRDMARead
		case uverbs.SendOpAtomicCmpAndSwp:
			wro = uverbs.WRAtomicCmpAndSwp
		case uverbs.SendOpAtomicFetchAdd:
			wro = uverbs.WRAtomicFetchAndAdd
		case uverbs.SendOpSendWithInv:
			wro = uverbs.WRSendWithInv
		default:
			t.Fatalf("unexpected %s", op)
		}
		require.NotZero(t, mlx5Opcode[wro], "%s", op)
	}
}
