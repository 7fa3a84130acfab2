package perftest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/uverbs"
)

func mustTest(t *testing.T, name string) Test {
	tt, ok := TestByName(name)
	require.True(t, ok, name)
	return tt
}

// Defaults after perftest's dependencies, as the captured C banners show
// them (TX depth, CQ moderation) and perftest_parameters.h sets them.
func TestDefaults(t *testing.T) {
	for _, tc := range []struct {
		test                                string
		args                                []string
		size, iters, tx, rx, cqMod, inlineP int
		noPeak                              bool
	}{
		{"write_bw", nil, 65536, 5000, 128, 1, 1, -1, false},
		{"write_bw", []string{"-s", "64"}, 64, 5000, 128, 1, 100, -1, false},
		{"read_bw", nil, 65536, 1000, 128, 1, 1, 0, false},
		{"send_bw", []string{"10.0.0.1"}, 65536, 1000, 128, 512, 1, -1, false},
		{"send_bw", nil, 65536, 1000, 128, 512, 1, -1, true}, // the receiver has no peak
		{"send_bw", []string{"-c", "UD", "10.0.0.1"}, 65536, 1000, 128, 1000, 100, -1, false},
		{"atomic_bw", nil, 8, 1000, 128, 1, 100, 0, false},
		{"write_lat", nil, 2, 1000, 1, 1, 1, -1, false},
		{"send_lat", nil, 2, 1000, 1, 512, 1, -1, false},
		{"read_lat", nil, 2, 1000, 1, 1, 1, 0, false},
		{"write_bw", []string{"-n", "20"}, 65536, 20, 20, 1, 1, -1, false},
		{"write_bw", []string{"-a", "-n", "20"}, 65536, 20, 20, 1, 20, -1, false},
		{"write_bw", []string{"-n", "30000"}, 65536, 30000, 128, 1, 1, -1, true}, // perftest drops the O(n²) peak
		{"write_bw", []string{"-D", "4"}, 65536, 0, 128, 1, 1, -1, true},
		{"write_bw", []string{"-l", "4", "-n", "100"}, 65536, 100, 100, 1, 4, -1, false},
		{"send_bw", []string{"-s", "1K", "-r", "33", "10.0.0.1"}, 1024, 1000, 128, 34, 100, -1, false}, // odd rx depth rounds up
		{"send_bw", []string{"-e", "10.0.0.1"}, 65536, 1000, 128, 512, 100, -1, false},                 // events keep cq_mod for large sizes
		{"read_bw", []string{"--events", "-X", "0"}, 65536, 1000, 128, 1, 100, 0, false},
	} {
		t.Run(tc.test+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			p, err := ParseArgs(mustTest(t, tc.test), "ib_"+tc.test, tc.args)
			require.NoError(t, err)
			if tc.test == "write_lat" || tc.test == "send_lat" {
				assert.Equal(t, 1, p.CQMod) // latency tests do not moderate
				tc.cqMod = p.CQMod
			}
			assert.Equal(t, tc.size, p.Size, "size")
			assert.Equal(t, tc.iters, p.Iters, "iterations")
			assert.Equal(t, tc.tx, p.TxDepth, "tx depth")
			assert.Equal(t, tc.rx, p.RxDepth, "rx depth")
			assert.Equal(t, tc.cqMod, p.CQMod, "cq moderation")
			assert.Equal(t, tc.inlineP, p.Inline, "inline")
			assert.Equal(t, tc.noPeak, p.NoPeak, "noPeak")
			assert.Equal(t, 18515, p.Port)
		})
	}
}

func TestParseForms(t *testing.T) {
	wb := mustTest(t, "write_bw")
	for _, args := range [][]string{
		{"-s", "4096", "-n", "10", "-x", "1", "host"},
		{"-s4096", "-n10", "-x1", "host"},
		{"--size=4096", "--iters", "10", "--gid-index=1", "host"},
		{"-s", "4K", "--iters=10", "-x", "1", "--", "host"},
	} {
		p, err := ParseArgs(wb, "ib_write_bw", args)
		require.NoError(t, err, "%q", args)
		assert.Equal(t, 4096, p.Size)
		assert.Equal(t, 10, p.Iters)
		assert.Equal(t, 1, p.GIDIndex)
		assert.Equal(t, "host", p.Server)
	}
	p, err := ParseArgs(wb, "ib_write_bw", []string{"-bF", "-q", "4"})
	require.NoError(t, err)
	assert.True(t, p.Bidir)
	assert.Equal(t, 4, p.NumQPs)
	p, err = ParseArgs(wb, "ib_write_bw", []string{"-h"})
	require.NoError(t, err)
	assert.True(t, p.Help)
	p, err = ParseArgs(wb, "ib_write_bw", nil)
	require.NoError(t, err)
	assert.Equal(t, -1, p.TOS)
	assert.Equal(t, 7, p.RetryCount)
	sb := mustTest(t, "send_bw")
	p, err = ParseArgs(sb, "ib_send_bw", []string{"-R", "-c", "UD", "-T", "96", "--retry_count=5", "host"})
	require.NoError(t, err)
	assert.Equal(t, UD, p.Conn)
	assert.True(t, p.WorkCM)
	assert.Equal(t, 96, p.TOS)
	assert.Equal(t, 5, p.RetryCount)
}

// Bad command lines fail with perftest's message (and usage for unknown
// options), never a panic; options ibgo cannot honour say why.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		test  string
		args  []string
		want  string
		usage bool
	}{
		{"write_bw", []string{"-s", "0"}, "Message Size should be between 1 and", false},
		{"write_bw", []string{"-s", "abc"}, "Message Size should be between 1 and", false},
		{"write_bw", []string{"-n", "2"}, "Iteration num should be between 5 and", false},
		{"write_bw", []string{"-n", "x"}, "should be int", false},
		{"write_bw", []string{"-t", "0"}, "Tx depth should be between 1 and 15000", false},
		{"write_bw", []string{"-m", "1000"}, "Invalid MTU - 1000", false},
		{"write_bw", []string{"-S", "16"}, "Only 15 Service levels", false},
		{"write_bw", []string{"-x", "99"}, "Gid index should be between 0 and 64", false},
		{"write_bw", []string{"-c", "UD"}, "UD connection only possible in SEND verb", false},
		{"read_bw", []string{"-c", "UC"}, "UC connection not possible in READ/ATOMIC verbs", false},
		{"write_bw", []string{"-c", "XX"}, "Invalid Connection type", false},
		{"write_lat", []string{"-q", "2"}, "Multiple QPs only available on bw tests", false},
		{"write_lat", []string{"-b"}, "Bidirectional is only available in BW test", false},
		{"write_bw", []string{"-H"}, "Available only on Latency tests", false},
		{"write_bw", []string{"-D", "2", "-a"}, "Duration mode currently doesn't support running on all sizes", false},
		{"write_bw", []string{"-D", "2", "-f", "1"}, "DURATION > 2*MARGIN", false},
		{"write_bw", []string{"-o", "4"}, "Outstanding reads only available on READ", false},
		{"atomic_bw", []string{"-s", "16"}, "Message size cannot be changed for Atomic tests", false},
		{"write_bw", []string{"-A", "CMP_AND_SWAP"}, "You are not running the atomic_lat/bw test", false},
		{"write_bw", []string{"-l", "3", "-n", "10"}, "multiple of post list size", false},
		{"write_bw", []string{"-p", "70000"}, "Port argument", false},
		{"write_bw", []string{"a", "b"}, "Invalid Command line", false},
		{"write_bw", []string{"--bogus"}, "unrecognized option '--bogus'", true},
		{"write_bw", []string{"-Y"}, "invalid option -- 'Y'", true},
		{"write_bw", []string{"-s"}, "option requires an argument -- 's'", true},
		{"write_bw", []string{"--size"}, "option '--size' requires an argument", true},
		{"send_bw", []string{"-T", "256", "-R"}, "TOS should be between 0 and 255", false},
		{"send_bw", []string{"-T", "x"}, "TOS argument x should be int", false},
		{"send_bw", []string{"-T", "32"}, "TOS only valid for rdma_cm based QP", false},
		{"send_bw", []string{"--retry_count=-1", "-R"}, "Retry Count must be non-negative", false},
		{"send_bw", []string{"-R", "-c", "UC"}, "UC is not supported in librdmacm", false},
		{"send_bw", []string{"-R", "-g"}, "doesn't support Multicast with rdma_cm", false},
		{"write_bw", []string{"--use_cuda=0"}, "built without CUDA", false},
		{"write_bw", []string{"-c", "DC"}, "DC connection is not supported", false},
		{"send_bw", []string{"-c", "UD", "-I", "900"}, "Max inline should be between 0 and 884", false},
		{"write_bw", []string{"-e"}, "Events feature not available on WRITE verb", false},
		{"write_lat", []string{"-X", "1"}, "Events feature not available on WRITE verb", false},
		{"send_bw", []string{"-X", "1"}, "Events must be enabled to select a completion vector", false},
		{"send_bw", []string{"-e", "-X", "3000"}, "EQN should be between 0 and 2048", false},
		{"send_bw", []string{"-e", "-D", "2"}, "Duration mode doesn't work with events", false},
		{"read_bw", []string{"-e", "--run_infinitely"}, "run_infinitely does not support events", false},
		{"write_bw", []string{"-g"}, "MultiCast feature only available on SEND verb", false},
		{"send_bw", []string{"-g", "-b"}, "Bidirectional mode not supported in multicast", false},
		{"send_bw", []string{"-g", "-q", "2"}, "Only 1 QP supported in multicast", false},
		{"send_bw", []string{"-g", "-M", "255:1:0"}, "want 16 numbers", false},
		{"send_bw", []string{"-g", "-M", "255:1:0:0:0:0:0:0:0:0:0:0:0:0:0:256"}, "byte 15", false},
	} {
		t.Run(tc.test+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := ParseArgs(mustTest(t, tc.test), "ib_"+tc.test, tc.args)
			require.Error(t, err)
			var pe *ParseError
			require.True(t, errors.As(err, &pe), "a ParseError: %v", err)
			assert.Contains(t, pe.Msg, tc.want)
			assert.Equal(t, tc.usage, pe.ShowUsage)
		})
	}
}

func TestRunExitStatus(t *testing.T) {
	var o, e strings.Builder
	assert.Equal(t, 1, Main(context.Background(), mustTest(t, "write_bw"), "ib_write_bw", []string{"-n", "1"}, &o, &e))
	assert.Contains(t, o.String(), "-----")
	assert.Contains(t, e.String(), "Iteration num should be between 5 and")
	o.Reset()
	e.Reset()
	assert.Equal(t, 0, Main(context.Background(), mustTest(t, "send_lat"), "ib_send_lat", []string{"-V"}, &o, &e))
	assert.Equal(t, "Version: 6.06\n", o.String())
	o.Reset()
	assert.Equal(t, 0, Main(context.Background(), mustTest(t, "send_lat"), "ib_send_lat", []string{"--help"}, &o, &e))
	assert.Contains(t, o.String(), "ib_send_lat <host>")
	o.Reset()
	assert.Equal(t, 1, Main(context.Background(), mustTest(t, "send_lat"), "ib_send_lat", []string{"--nope"}, &o, &e))
	assert.Contains(t, o.String(), "Options")
}

func FuzzParse(f *testing.F) {
	f.Add("write_bw", "-s 4096 -n 10 -x 1 host")
	f.Add("send_bw", "-c UD -a -D 3")
	f.Add("atomic_lat", "-A CMP_AND_SWAP --output=latency")
	f.Fuzz(func(t *testing.T, test, line string) {
		tt, ok := TestByName(test)
		if !ok {
			tt = Tests[len(test)%len(Tests)]
		}
		p, err := ParseArgs(tt, "ib_x", strings.Fields(line))
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error is not a ParseError: %v", err)
			}
			return
		}
		if p.Help || p.Version {
			return
		}
		if p.Size < 1 || p.TxDepth < 1 || p.CQMod < 1 || p.NumQPs < 1 || p.PostList < 1 {
			t.Fatalf("accepted parameters a run cannot use: %+v", p)
		}
	})
}

// What perftest prints while it parses (not errors) comes out the same.
func TestParseNotices(t *testing.T) {
	wb := mustTest(t, "write_bw")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-n", "320", "-l", "4"}, []string{resultLine + "Post List requested - CQ moderation will be the size of the post list\n"}},
		{[]string{"-s", "4096", "-n", "320", "-l", "4", "-Q", "2"}, nil},
		{[]string{"-s", "65536", "-Q", "10"}, []string{resultLine + "Warning: Large message requested and CQ moderation enabled\nWarning: It can lead to inaccurate results\n"}},
		{[]string{"-s", "65536", "-Q", "1"}, nil},
		{[]string{"-s", "65536"}, nil},
		{[]string{"-s", "4096", "-Q", "10"}, nil},
	} {
		p, err := ParseArgs(wb, "ib_write_bw", tc.args)
		require.NoError(t, err, "%q", tc.args)
		assert.Equal(t, tc.want, p.Notices, "%q", tc.args)
	}
}

// -g: UD after perftest's rules ran on the given connection type; the
// group's GID by role; -M in C's number forms.
func TestMulticastConfig(t *testing.T) {
	c, err := ParseArgs(mustTest(t, "send_bw"), "ib_send_bw", []string{"-g", "10.0.0.1"})
	require.NoError(t, err)
	assert.True(t, c.Mcast)
	assert.Equal(t, UD, c.Conn)
	assert.Equal(t, 1, c.CQMod, "cq_mod was settled while the connection was RC (64 KiB)")

	c, err = ParseArgs(mustTest(t, "send_bw"), "ib_send_bw", []string{"--mcg", "--MGID", "0xff:0x0e:0:0:0:0:0:0:0:0:0:0:0:0:010:1"})
	require.NoError(t, err)
	assert.Equal(t, uverbs.GID{0xff, 0x0e, 14: 8, 15: 1}, c.MGID, "hex, decimal and octal bytes")

	role := func(test string, server bool, args ...string) uverbs.GID {
		c, err := ParseArgs(mustTest(t, test), "ib_"+test, append([]string{"-g"}, args...))
		require.NoError(t, err)
		if !server {
			c.Server = "h"
		}
		e := &engine{cfg: &c.Config}
		return e.multicastGID()
	}
	def := uverbs.GID{255, 1, 0, 0, 0, 2, 201, 133}
	assert.Equal(t, def, role("send_bw", true))
	cli := def
	cli[15] = 1
	assert.Equal(t, cli, role("send_lat", false), "the latency client listens on the next group")
	g := uverbs.GID{255, 2, 15: 1}
	assert.Equal(t, g, role("send_lat", false, "-M", "255:2:0:0:0:0:0:0:0:0:0:0:0:0:0:1"), "-M is used as given")

	srv := &engine{cfg: &Config{Mcast: true, Test: mustTest(t, "send_bw")}}
	assert.True(t, srv.mcastReceiver())
	assert.True(t, srv.mgidLabel("local"))
	assert.False(t, srv.mgidLabel("remote"))
	cl := &engine{cfg: &Config{Mcast: true, Test: mustTest(t, "send_bw"), Server: "h"}}
	assert.False(t, cl.mcastReceiver(), "the send_bw client only sends")
	assert.True(t, cl.mgidLabel("remote"))
}

// The help lists -e/-X where perftest has them (not write) and -g/-M for
// send tests only, and no longer calls them refused.
func TestHelpListsEventsAndMulticast(t *testing.T) {
	send := Usage(Test{Send, BW}, "ib_send_bw")
	assert.Contains(t, send, "-e, --events")
	assert.Contains(t, send, "-X, --vector=N")
	assert.Contains(t, send, "-g, --mcg")
	assert.Contains(t, send, "-M, --MGID=")
	assert.NotContains(t, send, "-e, -g")
	read := Usage(Test{Read, LAT}, "ib_read_lat")
	assert.Contains(t, read, "-e, --events")
	assert.NotContains(t, read, "--mcg")
	write := Usage(Test{Write, BW}, "ib_write_bw")
	assert.NotContains(t, write, "--events")
	assert.NotContains(t, write, "--mcg")
}

// Over rdma_cm the keys are perftest 4.5's struct pingpong_dest, 56 bytes,
// big-endian, at its offsets.
func TestCMDestLayout(t *testing.T) {
	d := Dest{LID: 0x1234, OutReads: 16, QPN: 0x11, PSN: 0xabcdef, RKey: 0x1fffb9, VAddr: 0x7f58a406e000,
		GID: uverbs.GID{10: 0xff, 11: 0xff, 12: 10, 15: 1}}
	b := encodeCMDest(d, 1)
	require.Len(t, b, 56)
	assert.Equal(t, []byte{0, 0, 0x12, 0x34, 0, 0, 0, 16, 0, 0, 0, 0x11, 0, 0xab, 0xcd, 0xef, 0, 0x1f, 0xff, 0xb9, 0, 0, 0, 0}, b[:24])
	assert.Equal(t, []byte{0, 0, 0x7f, 0x58, 0xa4, 0x06, 0xe0, 0}, b[24:32], "vaddr at 24")
	assert.Equal(t, d.GID[:], b[32:48], "gid at 32")
	assert.Equal(t, []byte{0, 0, 0, 1}, b[52:56], "gid_index at 52")
	got, err := decodeCMDest(b)
	require.NoError(t, err)
	assert.Equal(t, d, got)
	assert.Equal(t, []byte{0xff, 0xff, 0xff, 0xff}, encodeCMDest(Dest{}, -1)[52:56], "no GID: -1")
	_, err = decodeCMDest(b[:40])
	assert.Error(t, err)
}
