package mlx5

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/uverbs"
)

// CQ.Resize as libmlx5's mlx5_resize_cq over the fake kernel, whose HCA
// writes a RESIZE_CQ CQE into the old ring and continues in the new one:
// the unpolled completions survive in order, the new size is reported,
// the grown CQ holds more than the old one could, and it keeps wrapping.
func TestFakeKernelResizeCQ(t *testing.T) {
	overBoth(t, func(t *testing.T, ioctl bool) {
		p := newFKPair(t, ioctl, 64, 16, 7, false)
		p.k.watchCQ(p.cqA)
		c := p.cqA.Driver().(*cq)
		wrid := uint64(0)
		next := uint64(0)
		expect := func(n int) {
			t.Helper()
			wc := make([]uverbs.WC, n)
			got, err := p.cqA.Poll(wc)
			require.NoError(t, err)
			require.Equal(t, n, got)
			for _, w := range wc {
				require.Equal(t, uverbs.WC{WRID: next, Opcode: uverbs.WCRDMAWrite, QPN: p.a.QPN()}, w)
				next++
			}
		}
		post := func(n int) {
			t.Helper()
			p.write(t, p.a, p.da, wrid, n)
			wrid += uint64(n)
		}
		post(5)
		expect(2)
		require.NoError(t, p.cqA.Resize(31))
		require.Equal(t, 31, p.cqA.CQE())
		require.Equal(t, uint32(32), c.ring.ncqe)
		expect(3) // the 3 unpolled ones came along
		post(20)  // more than the old 8-entry ring holds
		expect(20)
		for i := 0; i < 10; i++ { // laps of the new ring
			post(7)
			expect(7)
		}
		// Same size: nothing moves. Shrinking with completions pending.
		require.NoError(t, p.cqA.Resize(20))
		require.Equal(t, 31, p.cqA.CQE())
		post(2)
		require.NoError(t, p.cqA.Resize(3))
		require.Equal(t, 3, p.cqA.CQE())
		expect(2)
		post(3)
		expect(3)
		pollN(t, p.cqA, 0)
		require.Equal(t, 2, p.k.resized)
		require.False(t, p.k.dev.cqs[&c.ring].overrun)
	})
}
