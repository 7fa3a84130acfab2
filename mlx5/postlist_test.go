package mlx5

import (
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/uverbs"
)

// A list builds the same WQEs, byte for byte, as its WRs posted one at a
// time: post's WQE loop leaves for what needs a lookup (another AH, inline
// data in another MR or in several SGEs) and comes back in at the same WR,
// and none of that may show in the ring. The lists mix all of it, and the
// ring wraps several times.
func TestPostListMatchesSingles(t *testing.T) {
	for _, typ := range []uverbs.QPType{uverbs.QPTypeRC, uverbs.QPTypeUD} {
		t.Run(typ.String(), func(t *testing.T) {
			q := vQP{Type: num(typ), QPN: 0x1a0, BfregIndex: 24,
				Requested: vCap{MaxSendWR: 16, MaxRecvWR: 4, MaxSendSGE: 2, MaxRecvSGE: 1, MaxInlineData: 64}}
			list, single := newRig(t, q, vCQ{CQN: 0x400, CQECnt: 64}, vCQ{CQN: 0x401, CQECnt: 64}),
				newRig(t, q, vCQ{CQN: 0x400, CQECnt: 64}, vCQ{CQN: 0x401, CQECnt: 64})
			m1, m2 := make([]byte, 512), make([]byte, 512)
			for i := range m1 {
				m1[i], m2[i] = byte(i*3+1), byte(i*7+2)
			}
			ah1, ah2 := new(uverbs.AH), new(uverbs.AH)
			for _, r := range []*rig{list, single} {
				r.sq.local = regLocal(m1, m2)
				var a1, a2 av
				a1[0], a2[0] = 1, 2
				a1[47], a2[47] = 0x11, 0x22
				r.ahs[ah1], r.ahs[ah2] = &a1, &a2
			}
			sge := func(m []byte, lkey uint32, off, n int) uverbs.SGE {
				return uverbs.SGE{Addr: memAddr(m[off:]), Length: uint32(n), LKey: lkey}
			}
			ring := func(r *rig) []byte { return unsafe.Slice((*byte)(r.sq.buf), int(r.sq.wqeCnt)*sendWQEBB) }
			for round := 0; round < 60; round++ {
				k := round * 5 % 120 // moves the sizes, so the ring wraps inside different WQEs
				inl := uverbs.SendInline | uverbs.SendSignaled
				wrs := []uverbs.SendWR{
					{Opcode: uverbs.WRSend, Flags: inl, SGL: []uverbs.SGE{sge(m1, 1, k, 13+k%40)}},
					{Opcode: uverbs.WRSend, Flags: inl, SGL: []uverbs.SGE{sge(m2, 2, 2*k, 44)}},
					{Opcode: uverbs.WRSend, Flags: inl, SGL: []uverbs.SGE{sge(m1, 1, k+64, 64)}},
					{Opcode: uverbs.WRSendWithImm, Imm: uint32(round), Flags: inl, SGL: []uverbs.SGE{sge(m1, 1, 3, 5), sge(m2, 2, k, 20)}},
					{Opcode: uverbs.WRSendWithImm, Imm: 7, InlineData: m2[k : k+1+k%30]},
					{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{sge(m1, 1, 0, 100), sge(m2, 2, 8, 30)}},
					{Opcode: uverbs.WRSend, Flags: inl, SGL: []uverbs.SGE{sge(m2, 2, 200-k, 3)}},
				}
				if typ == uverbs.QPTypeRC {
					wrs[1].Opcode, wrs[1].RemoteAddr, wrs[1].RKey = uverbs.WRRDMAWrite, 0x1000+uint64(k), 9
				}
				for i := range wrs {
					wrs[i].WRID = uint64(round*100 + i)
					if typ == uverbs.QPTypeUD {
						wrs[i].AH, wrs[i].RemoteQPN, wrs[i].RemoteQKey = ah1, 0x77, 0x1111
						if i%3 == 1 {
							wrs[i].AH = ah2
						}
					}
				}
				n, err := list.sq.post(wrs)
				require.NoError(t, err)
				require.Equal(t, len(wrs), n)
				for i := range wrs {
					n, err := single.sq.post(wrs[i : i+1])
					require.NoError(t, err)
					require.Equal(t, 1, n)
				}
				require.Equal(t, single.sq.curPost, list.sq.curPost, "round %d: WQEBBs", round)
				require.Equal(t, ring(single), ring(list), "round %d: the ring", round)
				require.Equal(t, single.sq.wrid, list.sq.wrid, "round %d: wr_ids", round)
				for _, r := range []*rig{list, single} {
					r.sq.tail.Store(r.sq.head)
				}
			}
			require.Greater(t, list.sq.curPost, 3*list.sq.wqeCnt, "the ring wrapped")

			// A failing WR in the middle of a list, after a lookup: the WRs
			// before it are posted, it and those after are not.
			head := list.sq.head
			bad := []uverbs.SendWR{
				{Opcode: uverbs.WRSend, SGL: []uverbs.SGE{sge(m1, 1, 0, 8)}},
				{Opcode: uverbs.WRSend, Flags: uverbs.SendInline, SGL: []uverbs.SGE{sge(m2, 2, 0, 8), sge(m2, 1, 0, 8)}},
				{Opcode: uverbs.WRSend, SGL: []uverbs.SGE{sge(m1, 1, 0, 8)}},
			}
			if typ == uverbs.QPTypeUD {
				for i := range bad {
					bad[i].AH = ah2
				}
			}
			n, err := list.sq.post(bad)
			require.ErrorIs(t, err, syscall.EINVAL, "the second SGE is not in the MR its lkey names")
			require.Equal(t, 1, n)
			require.Equal(t, head+1, list.sq.head)
		})
	}
}

// post keeps the registered memory an inline SGE was found in for later
// posts only while the PD's MR generation holds: once the MR is
// deregistered, an inline send from the same (still mapped) memory is
// refused instead of copied from memory that is no longer registered.
func TestFakeKernelInlineAfterDereg(t *testing.T) {
	overBoth(t, func(t *testing.T, ioctl bool) {
		p := newFKPair(t, ioctl, 8, 8, 16, false)
		copy(p.memA, "abcdefgh")
		wr := uverbs.SendWR{WRID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled | uverbs.SendInline,
			RemoteAddr: memAddr(p.memB), RKey: p.mrB.RKey(), SGL: []uverbs.SGE{p.sgeA(0, 8)}}
		p.send(t, wr)
		pollN(t, p.cqA, 1)
		require.Equal(t, "abcdefgh", string(p.memB[:8]))
		require.NoError(t, p.mrA.Close())
		n, err := p.a.PostSend([]uverbs.SendWR{wr})
		require.ErrorIs(t, err, syscall.EINVAL, "inline data from a deregistered MR")
		require.Zero(t, n)
		// Registered again (a new lkey), the same memory is accepted.
		mr, err := p.pd.RegMR(p.memA, uverbs.AccessLocalWrite)
		require.NoError(t, err)
		defer mr.Close()
		copy(p.memA, "ijklmnop")
		wr.SGL[0].LKey = mr.LKey()
		p.send(t, wr)
		pollN(t, p.cqA, 1)
		require.Equal(t, "ijklmnop", string(p.memB[:8]))
	})
}

// A post list whose second WR fails after its slot was chosen (inline
// data longer than the QP's max_inline_data) rings the doorbell with the
// first WR, the last WQE built whole: the doorbell (here the BlueFlame
// copy of a single WQE) carries its opcode, index and QPN. Before the fix
// it carried the failed WR's unfinished slot: QPN 0 and index 0 on the
// first lap, a stale WQE after (issue 30, item 1). Over several laps of
// the ring.
func TestFailedWRDoesNotRing(t *testing.T) {
	q := vQP{Type: num(uverbs.QPTypeRC), QPN: 0x1a5, BfregIndex: 24,
		Requested: vCap{MaxSendWR: 16, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}}
	r := newRig(t, q, vCQ{CQN: 0x400, CQECnt: 64}, vCQ{CQN: 0x401, CQECnt: 64})
	good, long := make([]byte, 16), make([]byte, 200)
	for lap := 0; lap < 300; lap++ {
		for i := range good {
			good[i] = byte(lap + i)
		}
		cur := r.sq.curPost
		idx := cur & (r.sq.wqeCnt - 1)
		off := r.sq.bf.offset
		n, err := r.sq.post([]uverbs.SendWR{
			{WRID: uint64(lap), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, InlineData: good},
			{WRID: 1000, Opcode: uverbs.WRSend, InlineData: long},
		})
		require.Error(t, err, "lap %d", lap)
		require.Equal(t, 1, n, "lap %d: the first WR was posted", lap)
		wqe := unsafe.Slice((*byte)(unsafe.Add(r.sq.buf, uintptr(idx)<<sendWQEBBSh)), 64)
		db := unsafe.Slice((*byte)(unsafe.Add(r.sq.bf.reg, off)), 64)
		require.Equal(t, wqe, db, "lap %d: the doorbell copies the posted WQE", lap)
		hdr := be64(*(*uint64)(unsafe.Pointer(&db[0])))
		require.Equal(t, uint32(q.QPN), uint32(hdr)>>8, "lap %d: the doorbell names the QP", lap)
		require.Equal(t, cur&0xffff, uint32(hdr>>40)&0xffff, "lap %d: and the WQE's index", lap)
		require.Equal(t, be32(r.sq.curPost&0xffff), r.sq.dbrec[sndDBR], "lap %d: the doorbell record counts the posted WQE only", lap)
		r.sq.tail.Store(r.sq.head)
	}
	require.Greater(t, r.sq.curPost, 2*r.sq.wqeCnt, "the ring wrapped")
}

// Static bfregs as libmlx5's need_uuar_lock has them: index 0 (doorbell
// only) and the low-latency bfregs at the top take no lock, the medium
// ones between are shared by QPs and do (issue 30, item 4).
func TestStaticBfregLocks(t *testing.T) {
	const tot = 16 // the kernel's tot_bfregs for our request
	low := lowLatBfregs(tot)
	require.EqualValues(t, 4, low)
	gross := uint32(tot / nonFPBfregs * bfregsPerUAR)
	for bfi := uint32(0); bfi < gross; bfi++ {
		want := bfi != 0 && bfi <= 22 // (bfi/2 + bfi%2) < 16 - 4
		require.Equal(t, want, needBfregLock(bfi, tot, low), "bfreg %d", bfi)
	}
	require.EqualValues(t, 20, lowLatBfregs(32), "more bfregs: all above the medium threshold are low latency")
}

// Two QPs on one shared (medium) static bfreg post at once: each doorbell
// and BlueFlame copy, and the offset that alternates between the
// register's halves, happen under the bfreg's lock. The race tier runs
// this with the race detector, which reports the offset's unguarded
// update without the lock.
func TestSharedBfregConcurrentPosts(t *testing.T) {
	q := vQP{Type: num(uverbs.QPTypeRC), QPN: 0x1b0, BfregIndex: 5,
		Requested: vCap{MaxSendWR: 64, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}}
	a := newRig(t, q, vCQ{CQN: 0x400, CQECnt: 64}, vCQ{CQN: 0x401, CQECnt: 64})
	q.QPN = 0x1b1
	b := newRig(t, q, vCQ{CQN: 0x402, CQECnt: 64}, vCQ{CQN: 0x403, CQECnt: 64})
	shared := a.sq.bf
	shared.lock = new(sync.Mutex)
	b.sq.bf = shared
	var wg sync.WaitGroup
	for _, r := range []*rig{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := make([]byte, 40)
			for i := range 2000 {
				n, err := r.sq.post([]uverbs.SendWR{{WRID: uint64(i), Opcode: uverbs.WRSend, InlineData: msg}})
				if err != nil || n != 1 {
					t.Errorf("post %d: %d, %v", i, n, err)
					return
				}
				r.sq.tail.Store(r.sq.head)
			}
		}()
	}
	wg.Wait()
	require.Contains(t, []uintptr{0, shared.bufSize}, shared.offset, "4000 doorbells alternate the halves")
	require.Zero(t, shared.offset, "an even number of doorbells ends on the first half")
}
