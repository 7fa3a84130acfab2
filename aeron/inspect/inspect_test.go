package inspect

import (
	"bytes"
	"encoding/binary"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/internal/testvec"
	"github.com/ibgo/ibgo/internal/shm"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to create %s", path)
	require.Equal(t, string(want), string(got))
}

func decode(t *testing.T, in []byte, opts DecodeOptions) (string, DecodeSummary) {
	t.Helper()
	var out bytes.Buffer
	sum, err := Decode(&out, bytes.NewReader(in), opts)
	require.NoError(t, err)
	return out.String(), sum
}

func TestDecodeLossCapture(t *testing.T) {
	out, sum := decode(t, testvec.MustBytes(testvec.LossCubicPcap), DecodeOptions{})
	require.Equal(t, 1843, sum.Packets)
	require.Equal(t, 1843, sum.Datagrams)
	require.Zero(t, sum.Malformed)
	require.Equal(t, map[string]int{"DATA": 3850, "HEARTBEAT": 2, "PAD": 17, "NAK": 27, "SM": 192, "SETUP": 7, "RTTM": 638}, sum.Types)
	require.Equal(t, 3850+2+17+27+192+7+638, sum.Frames)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, sum.Frames+1)
	require.Equal(t, "2026-12-02T12:44:21.874646Z SETUP flags=0x00 session=994871370 stream=1001 term-id=-848725899 term-offset=0 frame-length=40 initial-term-id=-848725899 term-length=65536 mtu=1408 ttl=0 packet=1 offset=0 127.0.0.1:47945>127.0.0.1:20121", lines[0])
	has := func(substr string) string {
		for _, l := range lines {
			if strings.Contains(l, substr) {
				return l
			}
		}
		t.Fatalf("no line contains %q", substr)
		return ""
	}
	require.Contains(t, has(" SM flags=0x00 "), "session=994871370 stream=1001 term-id=-848725899 term-offset=0 frame-length=36 window=14080 receiver-id=3123316144682542844")
	require.Contains(t, has(" NAK "), "term-id=-848725899 term-offset=27648 frame-length=28 nak-length=1152")
	require.Contains(t, has(" PAD "), "flags=0xc0(B|E) session=994871370 stream=1001")
	require.Contains(t, has(" PAD "), "wire-length=32")
	require.Contains(t, has("RTTM flags=0x80(REPLY)"), "term-id=- term-offset=- frame-length=40 echo-timestamp=")
	require.Contains(t, has("HEARTBEAT flags=0xe0(B|E|EOS)"), "frame-length=0")
	require.Contains(t, has(" SM flags=0x40(EOS)"), "frame-length=36")
	require.Contains(t, has(" DATA flags=0xc0(B|E) "), "frame-length=288 payload=256")
	// A batched datagram: four frames from one packet at 32-byte aligned offsets.
	require.Contains(t, out, " offset=864 ")
	require.Equal(t, "# 1843 packets, 1843 UDP datagrams, 4733 frames (DATA 3850, HEARTBEAT 2, NAK 27, PAD 17, RTTM 638, SETUP 7, SM 192), 0 malformed", lines[len(lines)-1])
}

func TestDecodeResponseCaptureGolden(t *testing.T) {
	out, sum := decode(t, testvec.MustBytes(testvec.ResponseChannelPcap), DecodeOptions{})
	require.Zero(t, sum.Malformed)
	require.Equal(t, 1, sum.Types["RSP_SETUP"])
	require.Contains(t, out, " RSP_SETUP flags=0x00 session=-326546073 stream=10000 term-id=- term-offset=- frame-length=20 response-session-id=1255249243 ")
	require.Contains(t, out, " SETUP flags=0x80(SEND_RESPONSE) ")
	require.Contains(t, out, " SM flags=0x80(SETUP) ")
	golden(t, "udp-response-channel.decode", []byte(out))

	// The same capture gzipped, and filtered to the response channel's ports.
	gz, err := testvec.Gzipped(testvec.ResponseChannelPcap)
	require.NoError(t, err)
	zout, _ := decode(t, gz, DecodeOptions{})
	require.Equal(t, out, zout)
	fout, fsum := decode(t, gz, DecodeOptions{Port: 10001})
	require.Less(t, fsum.Datagrams, sum.Datagrams)
	require.Equal(t, sum.Datagrams, fsum.Datagrams+fsum.Filtered)
	for _, l := range strings.Split(strings.TrimSpace(fout), "\n") {
		if !strings.HasPrefix(l, "#") {
			require.Contains(t, l, ":10001", l)
		}
	}
}

// pcapWith wraps raw IPv4 packets in a classic pcap with link type RAW.
func pcapWith(pkts ...[]byte) []byte {
	var b bytes.Buffer
	for _, v := range []uint32{0xA1B2C3D4, 0x00040002, 0, 0, 65535, 101} {
		binary.Write(&b, binary.LittleEndian, v)
	}
	for i, p := range pkts {
		for _, v := range []uint32{uint32(1700000000 + i), 0, uint32(len(p)), uint32(len(p))} {
			binary.Write(&b, binary.LittleEndian, v)
		}
		b.Write(p)
	}
	return b.Bytes()
}

func udpPacket(payload []byte, proto byte) []byte {
	p := make([]byte, 28+len(payload))
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	p[9] = proto
	copy(p[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	binary.BigEndian.PutUint16(p[20:], 4000)
	binary.BigEndian.PutUint16(p[22:], 20121)
	binary.BigEndian.PutUint16(p[24:], uint16(8+len(payload)))
	copy(p[28:], payload)
	return p
}

func TestDecodeMalformed(t *testing.T) {
	good := make([]byte, 64) // one 34-byte DATA frame, aligned to 64
	binary.LittleEndian.PutUint32(good, 34)
	good[5] = 0xc0
	good[6] = 1
	badLen := append([]byte(nil), good...)
	binary.LittleEndian.PutUint32(badLen, 5000)
	trailing := append(append([]byte(nil), good...), 1, 2, 3)
	badVersion := append([]byte(nil), good...)
	badVersion[4] = 7
	badSM := make([]byte, 36)
	binary.LittleEndian.PutUint32(badSM, 36)
	badSM[6] = 3
	binary.LittleEndian.PutUint32(badSM[0:], 20)
	unknown := make([]byte, 16)
	binary.LittleEndian.PutUint32(unknown, 16)
	unknown[6] = 0x08
	truncatedIP := udpPacket(good, 17)[:30]
	tcp := udpPacket(nil, 6)
	in := pcapWith(udpPacket(good, 17), udpPacket(badLen, 17), udpPacket(trailing, 17), udpPacket(badVersion, 17),
		udpPacket(badSM, 17), udpPacket(unknown, 17), truncatedIP, tcp, udpPacket(nil, 17))
	out, sum := decode(t, in, DecodeOptions{})
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{
		`2023-11-14T22:13:20.000000Z DATA flags=0xc0(B|E) session=0 stream=0 term-id=0 term-offset=0 frame-length=34 payload=2 packet=1 offset=0 10.0.0.1:4000>10.0.0.2:20121`,
		`2023-11-14T22:13:21.000000Z MALFORMED packet=2 offset=0 10.0.0.1:4000>10.0.0.2:20121 error="protocol: decode DATA frame at offset 0: frame_length 5000 exceeds the 64 bytes left in the datagram"`,
		`2023-11-14T22:13:22.000000Z DATA flags=0xc0(B|E) session=0 stream=0 term-id=0 term-offset=0 frame-length=34 payload=2 packet=3 offset=0 10.0.0.1:4000>10.0.0.2:20121`,
		`2023-11-14T22:13:22.000000Z MALFORMED packet=3 offset=64 10.0.0.1:4000>10.0.0.2:20121 error="protocol: decode PAD frame at offset 64: only 3 bytes left, less than the 8-byte frame header"`,
		`2023-11-14T22:13:23.000000Z MALFORMED packet=4 offset=0 10.0.0.1:4000>10.0.0.2:20121 error="protocol: decode DATA frame at offset 0: version 7, want 0"`,
		`2023-11-14T22:13:24.000000Z MALFORMED packet=5 offset=0 10.0.0.1:4000>10.0.0.2:20121 error="protocol: decode SM frame at offset 0: frame_length 20 is less than the 36-byte SM header"`,
		`2023-11-14T22:13:25.000000Z ATS_DATA flags=0x00 session=- stream=- term-id=- term-offset=- frame-length=16 note="ATS (Aeron Transport Security) is not decoded" packet=6 offset=0 10.0.0.1:4000>10.0.0.2:20121`,
		`2023-11-14T22:13:26.000000Z MALFORMED packet=7 error="pcap: packet 7 at byte 599: IPv4 total length 92 exceeds the 30 bytes captured (snaplen too small?)"`,
		`2023-11-14T22:13:28.000000Z MALFORMED packet=9 offset=0 10.0.0.1:4000>10.0.0.2:20121 error="empty UDP datagram"`,
		`# 9 packets, 7 UDP datagrams, 3 frames (ATS_DATA 1, DATA 2), 6 malformed, 1 not UDP`,
	}
	require.Equal(t, want, lines)
	require.Equal(t, 6, sum.Malformed)

	_, err := Decode(&bytes.Buffer{}, strings.NewReader("this is not a capture, it is text"), DecodeOptions{})
	require.True(t, IsNotCapture(err), "%v", err)
	cut := in[:len(in)-3]
	var buf bytes.Buffer
	_, err = Decode(&buf, bytes.NewReader(cut), DecodeOptions{})
	require.ErrorContains(t, err, "pcap: packet 9 at byte")
	require.Contains(t, buf.String(), "# 8 packets", "what was read is still printed")
	_, err = Decode(&buf, bytes.NewReader([]byte{0x1f, 0x8b, 0, 0}), DecodeOptions{})
	require.ErrorContains(t, err, "gzip")
}

// The vector capture rewritten as pcapng decodes to the same lines.
func TestDecodePcapNG(t *testing.T) {
	classic := testvec.MustBytes(testvec.ResponseChannelPcap)
	var ng bytes.Buffer
	block := func(typ uint32, body []byte) {
		for len(body)%4 != 0 {
			body = append(body, 0)
		}
		binary.Write(&ng, binary.LittleEndian, typ)
		binary.Write(&ng, binary.LittleEndian, uint32(12+len(body)))
		ng.Write(body)
		binary.Write(&ng, binary.LittleEndian, uint32(12+len(body)))
	}
	block(0x0A0D0D0A, []byte{0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	block(1, []byte{1, 0, 0, 0, 0, 0, 4, 0})
	for off := 24; off < len(classic); {
		sec := binary.LittleEndian.Uint32(classic[off:])
		usec := binary.LittleEndian.Uint32(classic[off+4:])
		n := binary.LittleEndian.Uint32(classic[off+8:])
		ts := uint64(sec)*1e6 + uint64(usec)
		body := binary.LittleEndian.AppendUint32(nil, 0)
		body = binary.LittleEndian.AppendUint32(body, uint32(ts>>32))
		body = binary.LittleEndian.AppendUint32(body, uint32(ts))
		body = binary.LittleEndian.AppendUint32(body, n)
		body = binary.LittleEndian.AppendUint32(body, n)
		body = append(body, classic[off+16:off+16+int(n)]...)
		block(6, body)
		off += 16 + int(n)
	}
	want, _ := decode(t, classic, DecodeOptions{})
	got, _ := decode(t, ng.Bytes(), DecodeOptions{})
	require.Equal(t, want, got)
}

func TestStat(t *testing.T) {
	f, err := cnc.Wrap(testvec.Copy(testvec.CnC, shm.Alloc))
	require.NoError(t, err)
	var out bytes.Buffer
	now := time.UnixMilli(1796215463729 + 188)
	require.NoError(t, Stat(&out, f, now, time.UTC))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Equal(t, "2026-12-02 12:44:23.917+0000 - Aeron Stat (CnC v0.2.0), pid 30052, heartbeat age 188ms", lines[0])
	require.Equal(t, "===========================", lines[1])
	require.Equal(t, "  0 :            3,024,064 - Bytes sent", lines[2])
	require.Equal(t, " 40 :    1,796,215,463,917 - client-heartbeat: id=1 name= version=1.48.0-SNAPSHOT commit=+guilty", lines[42])
	require.Equal(t, " 55 :            3,029,920 - sub-pos: 4 994871370 1001 aeron:udp?endpoint=localhost:20121|cc=cubic @0", lines[57])
	require.Len(t, lines, 2+56)
	golden(t, "cnc.stat", out.Bytes())
}

func TestFormatting(t *testing.T) {
	for v, s := range map[int64]string{0: "0", 999: "999", 1000: "1,000", -1: "-1", -999: "-999", -1000: "-1,000",
		1234567: "1,234,567", -9223372036854775808: "-9,223,372,036,854,775,808", 9223372036854775807: "9,223,372,036,854,775,807"} {
		require.Equal(t, s, FormatNumber(v))
	}
	require.Equal(t, "1970-01-01 01:00:01.005+0100", FormatDate(1005, time.FixedZone("CET", 3600)))
}

func TestErrorsAndLoss(t *testing.T) {
	l := cnc.Layout{ToDriverCapacity: 1024, ToClientsCapacity: 1024, CounterValuesLength: 1024, ErrorLogLength: 1024, PID: 7}
	f, err := cnc.Init(shm.Alloc(l.Length()), l)
	require.NoError(t, err)
	var out bytes.Buffer
	n, err := Errors(&out, f, time.UTC)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, "\n0 distinct errors observed.\n", out.String())

	now := int64(1796215460721)
	el, err := cnc.NewDistinctErrorLog(f.ErrorLogBuffer(), func() int64 { return now })
	require.NoError(t, err)
	require.NoError(t, el.Record(4, "(-4) channel endpoint error: bind failed"))
	now += 1500
	require.NoError(t, el.Record(4, "(-4) channel endpoint error: bind failed"))
	require.NoError(t, el.Record(1, "(-1) invalid channel: aeron:udp?mtu=1000"))
	out.Reset()
	n, err = Errors(&out, f, time.UTC)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, `***
2 observations from 2026-12-02 12:44:20.721+0000 to 2026-12-02 12:44:22.221+0000 for:
 (-4) channel endpoint error: bind failed
***
1 observations from 2026-12-02 12:44:22.221+0000 to 2026-12-02 12:44:22.221+0000 for:
 (-1) invalid channel: aeron:udp?mtu=1000

2 distinct errors observed.
`, out.String())

	report := shm.Alloc(1024)
	lr, err := cnc.NewLossReport(report)
	require.NoError(t, err)
	off, err := lr.CreateEntry(1152, now, 994871370, 1001, "aeron:udp?endpoint=localhost:20121|cc=cubic", "127.0.0.1:47945")
	require.NoError(t, err)
	lr.RecordObservation(off, 1152, now+10)
	out.Reset()
	n, err = Loss(&out, report, time.UTC)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, `OBSERVATION_COUNT, TOTAL_BYTES_LOST, FIRST_OBSERVATION, LAST_OBSERVATION, SESSION_ID, STREAM_ID, CHANNEL, SOURCE
2,2304,2026-12-02 12:44:22.221+0000,2026-12-02 12:44:22.231+0000,994871370,1001,aeron:udp?endpoint=localhost:20121|cc=cubic,127.0.0.1:47945
1 entries read
`, out.String())
}

// FuzzDecode: the decode command on arbitrary capture bytes never panics
// and ends with a summary line whenever the header was a capture's.
func FuzzDecode(f *testing.F) {
	f.Add(pcapWith(udpPacket(make([]byte, 64), 17)))
	b := testvec.MustBytes(testvec.ResponseChannelPcap)
	f.Add(b[:2048])
	f.Fuzz(func(t *testing.T, data []byte) {
		var out bytes.Buffer
		_, err := Decode(&out, bytes.NewReader(data), DecodeOptions{})
		if err == nil && !strings.Contains(out.String(), "# ") {
			t.Fatal("no summary")
		}
	})
}
