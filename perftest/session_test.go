package perftest

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/uverbs"
)

func TestKeyMessages(t *testing.T) {
	d := Dest{LID: 0x12, OutReads: 0x80, QPN: 0x11, PSN: 0x827472, RKey: 0x398, VAddr: 0x7f3f9bdae000, SRQN: 0}
	b := d.encode(keyNoGID)
	require.Len(t, b, keyLen)
	// KEY_PRINT_FMT as perftest prints it; the message ends in NULs.
	assert.Equal(t, "0012:0080:000011:827472:00000398:00007f3f9bdae000:00000000", strings.TrimRight(string(b), "\x00"))
	got, err := decodeDest(b)
	require.NoError(t, err)
	assert.Equal(t, d, got)

	g, err := uverbs.ParseGID("10.0.0.1")
	require.NoError(t, err)
	d.GID = g
	b = d.encode(keyWithGID)
	require.Len(t, b, keyLenGID)
	assert.Equal(t, "0012:0080:000011:827472:00000398:00007f3f9bdae000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01:00000000:", strings.TrimRight(string(b), "\x00"))
	got, err = decodeDest(b)
	require.NoError(t, err)
	assert.Equal(t, d, got)

	for _, bad := range []string{"", "0012", "zz12:0080:000011:827472:00000398:00007f3f9bdae000:00000000", "1:2:3:4:5:6:7:8"} {
		_, err := decodeDest([]byte(bad))
		assert.Error(t, err, "%q", bad)
	}
}

func FuzzDecodeDest(f *testing.F) {
	f.Add(Dest{QPN: 1, PSN: 2}.encode(keyNoGID))
	f.Add(Dest{QPN: 1, PSN: 2, GID: uverbs.GID{15: 1}}.encode(keyWithGID))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := decodeDest(b)
		if err != nil {
			return
		}
		// Whatever parses re-encodes to something that parses the same.
		for _, g := range []bool{false, true} {
			d2, err := decodeDest(d.encode(keyForm(g)))
			if err != nil {
				t.Fatalf("re-encoded %+v does not parse: %v", d, err)
			}
			if !g {
				d2.GID = d.GID
			}
			if d2 != d {
				t.Fatalf("round trip %+v -> %+v", d, d2)
			}
		}
	})
}

// oobPair connects a client and a server oob over loopback TCP.
func oobPair(t *testing.T) (cli, srv *oob) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ch := make(chan *oob, 1)
	go func() {
		o, err := listenOOB(context.Background(), port)
		if err != nil {
			t.Error(err)
		}
		ch <- o
	}()
	cli, err = dialOOB(context.Background(), "127.0.0.1", port, 5*time.Second)
	require.NoError(t, err)
	srv = <-ch
	require.NotNil(t, srv)
	cli.deadline, srv.deadline = 5*time.Second, 5*time.Second
	t.Cleanup(func() { cli.Close(); srv.Close() })
	return cli, srv
}

func both(f, g func() error) (error, error) {
	ch := make(chan error, 1)
	go func() { ch <- g() }()
	a := f()
	return a, <-ch
}

// Two ibgo peers with different options refuse to run, naming the options;
// perftest would hang or fail with a remote access error.
func TestParamMismatchBetweenIbgoPeers(t *testing.T) {
	wb, _ := TestByName("write_bw")
	pc, err := ParseArgs(wb, "ib_write_bw", []string{"-s", "4096", "-n", "100", "10.0.0.1"})
	require.NoError(t, err)
	ps, err := ParseArgs(wb, "ib_write_bw", []string{"-s", "8192", "-q", "2"})
	require.NoError(t, err)
	cli, srv := oobPair(t)
	e1, e2 := both(func() error {
		if err := cli.versions(); err != nil {
			return err
		}
		return cli.compareParams(summarize(&pc.Config, keyWithGID))
	}, func() error {
		if err := srv.versions(); err != nil {
			return err
		}
		return srv.compareParams(summarize(&ps.Config, keyWithGID))
	})
	for _, err := range []error{e1, e2} {
		require.Error(t, err)
		assert.True(t, errors.Is(err, ErrMismatch))
		assert.Contains(t, err.Error(), "message size (-s)")
		assert.Contains(t, err.Error(), "iterations (-n)")
		assert.Contains(t, err.Error(), "number of QPs (-q)")
	}
	assert.Contains(t, e1.Error(), "this side 4096, the peer 8192")
	assert.True(t, cli.remIbgo && srv.remIbgo)
	assert.Equal(t, 6.06, cli.remVer)
}

// A C peer's version carries no marker: no parameter message is sent.
func TestCPeerVersion(t *testing.T) {
	cli, srv := oobPair(t)
	e1, e2 := both(func() error { return cli.versions() }, func() error {
		rem, err := srv.xchg([]byte("6.06\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"), versionLen)
		if err == nil && !strings.HasPrefix(string(rem), "6.06\x00ibgo1") {
			t.Errorf("ibgo's version message is %q", rem)
		}
		return err
	})
	require.NoError(t, e1)
	require.NoError(t, e2)
	assert.False(t, cli.remIbgo)
	require.NoError(t, cli.compareParams(paramSummary{}), "no exchange with a C peer")

	cli, srv = oobPair(t)
	e1, _ = both(func() error { return cli.versions() }, func() error {
		_, err := srv.xchg([]byte("5.60\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"), versionLen)
		return err
	})
	require.Error(t, e1)
	assert.Contains(t, printed(e1), "older than 5.70")
}

// One side with a GID (RoCE, -x) and one without: named, not a hang.
func TestKeyFormMismatch(t *testing.T) {
	cli, srv := oobPair(t)
	cli.withGID, srv.withGID = true, false
	d := Dest{QPN: 5, PSN: 6}
	// The side that notices exits (closing its socket); the other then
	// stops too instead of waiting.
	hs := func(o *oob) func() error {
		return func() error {
			_, err := o.handshake(d)
			if err != nil {
				o.Close()
			}
			return err
		}
	}
	e1, e2 := both(hs(cli), hs(srv))
	require.Error(t, e2)
	assert.Contains(t, e2.Error(), "108-byte keys")
	require.Error(t, e1)
	assert.Contains(t, printed(e1), "Couldn't read remote address")

	cli, srv = oobPair(t)
	cli.withGID, srv.withGID = false, true
	e1, e2 = both(hs(cli), hs(srv))
	require.Error(t, e2)
	assert.Contains(t, e2.Error(), "59-byte keys")
	require.Error(t, e1)
}

func TestBWReportExchange(t *testing.T) {
	cli, srv := oobPair(t)
	cli.remVer, srv.remVer = 6.06, 6.06
	mine := bwReport{Size: 65536, Iters: 5000, Peak: 1234.5, Avg: 1200.25, MsgRate: 0.019}
	var got bwReport
	e1, e2 := both(func() error { var err error; got, err = srv.reports(bwReport{}); return err }, func() error { _, err := cli.reports(mine); return err })
	require.NoError(t, e1)
	require.NoError(t, e2)
	assert.Equal(t, mine, got)
}

// printed is err as the tools print it (perftest's wording).
func printed(err error) string {
	var o, e strings.Builder
	PrintError(&o, &e, err)
	return e.String()
}

// The end-of-test barrier waits for the peer however long it runs (the BW
// server of write/read/atomic waits there for the client's whole test),
// while the setup handshake keeps its deadline. The deadline is shrunk to
// 50 ms and the peer answers after 300 ms: before the fix every handshake
// of the flow timed out after the 120 s deadline.
func TestBarrierHasNoDeadline(t *testing.T) {
	cli, srv := oobPair(t)
	cli.deadline, srv.deadline = 50*time.Millisecond, 50*time.Millisecond
	d := Dest{QPN: 5, PSN: 6}
	late := func() error {
		time.Sleep(300 * time.Millisecond)
		_, err := cli.barrier(d)
		return err
	}
	e1, e2 := both(func() error { _, err := srv.barrier(d); return err }, late)
	require.NoError(t, e1, "the waiting side")
	require.NoError(t, e2)

	// The setup handshake still gives up.
	e1, e2 = both(func() error { _, err := srv.handshake(d); return err }, func() error {
		time.Sleep(300 * time.Millisecond)
		return nil
	})
	require.Error(t, e1, "the setup handshake has a deadline")
	require.NoError(t, e2)

	// A peer that goes away ends the barrier.
	cli, srv = oobPair(t)
	e1, _ = both(func() error { _, err := srv.barrier(d); return err }, func() error {
		time.Sleep(100 * time.Millisecond)
		return cli.Close()
	})
	require.Error(t, e1, "the peer closed the connection")
}
