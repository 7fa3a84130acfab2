package perftest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/uverbs"
)

// build signals the WRs of a post list as ctx_set_send_reg_wqes does: every
// one with (j+1)%cq_mod == 0, so that each completion stands for the cq_mod
// WRs sendDone counts. Before the fix only the list's last WR was signalled:
// -l 4 -Q 1 counted one WR per four posted and the loop stalled.
func TestBuildSignalsEveryCQModWR(t *testing.T) {
	for _, tc := range []struct {
		postList, cqMod int
		want            []bool
	}{
		{4, 2, []bool{false, true, false, true}},
		{4, 1, []bool{true, true, true, true}},
		{4, 4, []bool{false, false, false, true}},
		{4, 0, []bool{false, false, false, true}}, // unset: the list's size, perftest's default
		// A list shorter than cq_mod has no WR to signal; prepare refuses
		// the configuration (TestPostListCQModRefused).
		{2, 4, []bool{false, false}},
		{1, 100, []bool{true}}, // a single WR keeps its flag; fillSQ moderates per post
	} {
		l := sendList{op: uverbs.WRRDMAWrite, flags: uverbs.SendSignaled, size: 64, postList: tc.postList,
			cqMod: tc.cqMod, step: 64, cycle: true, pageSize: 4096, base: 1 << 20, rbase: 2 << 20}
		wrs, _ := l.build()
		got := make([]bool, len(wrs))
		for j := range wrs {
			got[j] = wrs[j].Flags&uverbs.SendSignaled != 0
		}
		assert.Equal(t, tc.want, got, "-l %d -Q %d", tc.postList, tc.cqMod)
	}
}

// A post list that is not a whole number of cq_mod groups is refused, also
// when cq_mod only became too large for the list by the TX-depth cap.
func TestPostListCQModRefused(t *testing.T) {
	for _, tc := range []struct{ postList, cqMod, tx int }{{2, 4, 128}, {4, 4, 3}} {
		c := defaults(Test{Write, BW})
		c.PostList, c.CQMod, c.CQModGiven, c.TxDepth, c.Iters = tc.postList, tc.cqMod, true, tc.tx, 1000
		_, err := c.prepare()
		var pe *ParseError
		require.ErrorAs(t, err, &pe, "%+v", tc)
		assert.Contains(t, pe.Msg, "multiple of CQ moderation")
	}
	c := defaults(Test{Write, BW})
	c.PostList, c.CQMod, c.CQModGiven, c.Iters = 4, 2, true, 1000
	_, err := c.prepare()
	require.NoError(t, err)
}
