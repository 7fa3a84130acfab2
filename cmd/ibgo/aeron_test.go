package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/internal/shm"
)

const vectors = "../../aeron/internal/testvec/testdata/"

func gunzipTo(t *testing.T, src, dst string) {
	t.Helper()
	f, err := os.Open(src)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	b, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(dst, b, 0o644))
}

func TestAeronDecode(t *testing.T) {
	code, out, stderr := runIbgo(t, "aeron", "decode", vectors+"udp-loss-cubic.pcap.gz")
	require.Equal(t, 0, code, stderr)
	require.Empty(t, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4733+1)
	require.True(t, strings.HasPrefix(lines[0], "2026-12-02T12:44:21.874646Z SETUP flags=0x00 session=994871370 stream=1001 term-id=-848725899 term-offset=0 frame-length=40 "), lines[0])
	require.Equal(t, "# 1843 packets, 1843 UDP datagrams, 4733 frames (DATA 3850, HEARTBEAT 2, NAK 27, PAD 17, RTTM 638, SETUP 7, SM 192), 0 malformed", lines[len(lines)-1])

	plain := filepath.Join(t.TempDir(), "rsp.pcap")
	gunzipTo(t, vectors+"udp-response-channel.pcap.gz", plain)
	code, out, _ = runIbgo(t, "aeron", "decode", "--port", "20125", plain)
	require.Equal(t, 0, code)
	require.Contains(t, out, " RSP_SETUP flags=0x00 session=-326546073 stream=10000 ")
	require.Contains(t, out, "on other ports")
	require.NotContains(t, out, ":20121")
}

func TestAeronDecodeBadInput(t *testing.T) {
	dir := t.TempDir()
	code, out, stderr := runIbgo(t, "aeron", "decode")
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Contains(t, stderr, "usage: ibgo aeron decode [--port N] FILE.pcap")

	code, _, stderr = runIbgo(t, "aeron", "decode", filepath.Join(dir, "missing.pcap"))
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "cannot read capture: open "+filepath.Join(dir, "missing.pcap")+": no such file or directory")

	text := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(text, []byte("hello, this is not a capture\n"), 0o644))
	code, _, stderr = runIbgo(t, "aeron", "decode", text)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, text+" is not a packet capture")
	require.Contains(t, stderr, "pcap and pcapng")

	whole := filepath.Join(dir, "rsp.pcap")
	gunzipTo(t, vectors+"udp-response-channel.pcap.gz", whole)
	b, err := os.ReadFile(whole)
	require.NoError(t, err)
	cut := filepath.Join(dir, "cut.pcap")
	require.NoError(t, os.WriteFile(cut, b[:len(b)-10], 0o644))
	code, out, stderr = runIbgo(t, "aeron", "decode", cut)
	require.Equal(t, 1, code)
	require.Contains(t, out, "# 296 packets", "frames before the damage are printed")
	require.Contains(t, stderr, "pcap: packet 297 at byte")
	require.Contains(t, stderr, "packet data cut short")

	code, _, stderr = runIbgo(t, "aeron", "decode", "--port", "70000", whole)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "--port 70000 is not a UDP port")
}

var statHeader = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}[+-]\d{4} - Aeron Stat \(CnC v0\.2\.0\), pid 30052, heartbeat age -?\d+ms$`)

func TestAeronStat(t *testing.T) {
	dir := t.TempDir()
	gunzipTo(t, vectors+"cnc.dat.gz", filepath.Join(dir, "cnc.dat"))
	check := func(out string) {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 2+56)
		require.Regexp(t, statHeader, lines[0])
		require.Equal(t, "===========================", lines[1])
		require.Equal(t, "  0 :            3,024,064 - Bytes sent", lines[2])
		require.Equal(t, " 44 :            3,062,688 - pub-lmt: 2 994871370 1001 aeron:udp?endpoint=localhost:20121|term-length=64k ", lines[46])
	}
	code, out, stderr := runIbgo(t, "aeron", "stat", "--dir", dir)
	require.Equal(t, 0, code, stderr)
	check(out)

	t.Setenv("AERON_DIR", dir)
	code, out, _ = runIbgo(t, "aeron", "stat")
	require.Equal(t, 0, code)
	check(out)

	code, out, _ = runIbgo(t, "aeron", "stat", "--watch", "--count", "2", "--interval", "10ms")
	require.Equal(t, 0, code)
	frames := strings.Split(out, "\033[2J\033[H")
	require.Len(t, frames, 3, "two screens, each after a clear")
	check(frames[1])
	check(frames[2])
	code, _, stderr = runIbgo(t, "aeron", "stat", "--watch", "--interval", "0s")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "--interval 0s must be positive")
}

func TestAeronStatNoDriver(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AERON_DIR", "")
	code, out, stderr := runIbgo(t, "aeron", "stat", "--dir", dir)
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Contains(t, stderr, "no CnC file at "+filepath.Join(dir, "cnc.dat")+" (Aeron directory "+dir+", from --dir): is a media driver running there?")

	t.Setenv("AERON_DIR", dir)
	_, _, stderr = runIbgo(t, "aeron", "errors")
	require.Contains(t, stderr, "from AERON_DIR")

	t.Setenv("AERON_DIR", "")
	t.Setenv("USER", "someone-without-a-driver")
	_, _, stderr = runIbgo(t, "aeron", "stat")
	require.Contains(t, stderr, "no CnC file at /dev/shm/aeron-someone-without-a-driver/cnc.dat")
	require.Contains(t, stderr, "the default; set AERON_DIR or --dir to choose another")

	// A driver that has created the file but not yet published the version.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cnc.dat"), make([]byte, 4096), 0o644))
	code, _, stderr = runIbgo(t, "aeron", "stat", "--dir", dir)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "is not initialised yet (cnc_version 0): the media driver is still starting")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cnc.dat"), []byte{1}, 0o644))
	code, _, stderr = runIbgo(t, "aeron", "stat", "--dir", dir)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "shorter than the 128-byte CnC header")
}

func TestAeronErrorsAndLoss(t *testing.T) {
	dir := t.TempDir()
	gunzipTo(t, vectors+"cnc.dat.gz", filepath.Join(dir, "cnc.dat"))
	code, out, stderr := runIbgo(t, "aeron", "errors", "--dir", dir)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "\n0 distinct errors observed.\n", out)

	dir2 := t.TempDir()
	l := cnc.Layout{ToDriverCapacity: 1024, ToClientsCapacity: 1024, CounterValuesLength: 1024, ErrorLogLength: 4096, PID: 1, StartTimestamp: time.Now()}
	f, err := cnc.Create(cnc.Path(dir2), l)
	require.NoError(t, err)
	el, err := cnc.NewDistinctErrorLog(f.ErrorLogBuffer(), func() int64 { return 1796215460721 })
	require.NoError(t, err)
	require.NoError(t, el.Record(4, "(-4) channel endpoint error: bind failed"))
	require.NoError(t, el.Record(4, "(-4) channel endpoint error: bind failed"))
	require.NoError(t, f.Close())
	code, out, _ = runIbgo(t, "aeron", "errors", "--dir", dir2)
	require.Equal(t, 0, code)
	require.Regexp(t, `^\*\*\*\n2 observations from \d{4}-\d\d-\d\d [0-9:.]+[+-]\d{4} to [0-9: .+-]+ for:\n \(-4\) channel endpoint error: bind failed\n\n1 distinct errors observed\.\n$`, out)

	code, _, stderr = runIbgo(t, "aeron", "loss", "--dir", dir2)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "no loss report at "+filepath.Join(dir2, "loss-report.dat"))
	m, err := shm.Create(cnc.LossReportPath(dir2), cnc.DefaultLossReportLength)
	require.NoError(t, err)
	lr, err := cnc.NewLossReport(m.Bytes())
	require.NoError(t, err)
	_, err = lr.CreateEntry(57344, 1796215460721, 994871370, 1001, "aeron:udp?endpoint=localhost:20121|cc=cubic", "127.0.0.1:47945")
	require.NoError(t, err)
	require.NoError(t, m.Close())
	code, out, stderr = runIbgo(t, "aeron", "loss", "--dir", dir2)
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3)
	require.Equal(t, "OBSERVATION_COUNT, TOTAL_BYTES_LOST, FIRST_OBSERVATION, LAST_OBSERVATION, SESSION_ID, STREAM_ID, CHANNEL, SOURCE", lines[0])
	require.Regexp(t, `^1,57344,[^,]+,[^,]+,994871370,1001,aeron:udp\?endpoint=localhost:20121\|cc=cubic,127\.0\.0\.1:47945$`, lines[1])
	require.Equal(t, "1 entries read", lines[2])
}

func TestAeronHelp(t *testing.T) {
	var out bytes.Buffer
	code := run([]string{"ibgo", "aeron", "--help"}, &out, &out)
	require.Equal(t, 0, code)
	for _, sub := range []string{"decode", "stat", "errors", "loss"} {
		require.Contains(t, out.String(), sub)
	}
}
