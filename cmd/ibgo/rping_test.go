package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRpingArgs(t *testing.T) {
	o, err := parseRpingArgs([]string{"-c", "-a", "10.0.0.1", "-C10", "-vV", "-S", "100", "-p", "7000", "-I", "10.0.0.2"})
	require.NoError(t, err)
	require.True(t, o.client)
	require.True(t, o.verbose)
	require.True(t, o.validate)
	require.Equal(t, 10, o.count)
	require.Equal(t, 100, o.size)
	require.Equal(t, 7000, o.port)
	require.Equal(t, "10.0.0.1", o.addr)
	require.Equal(t, "10.0.0.2", o.src)
	o, err = parseRpingArgs([]string{"-s"})
	require.NoError(t, err)
	require.Equal(t, 64, o.size, "rping.c's default, not the man page's 100")
	require.Equal(t, 7174, o.port)
	for _, bad := range [][]string{{}, {"-s", "-c"}, {"-c"}, {"-s", "-S", "25"}, {"-s", "-S", "65536"}, {"-s", "-x"}, {"-s", "-C"}, {"-s", "-p", "x"}, {"-s", "extra"}} {
		_, err := parseRpingArgs(bad)
		require.Error(t, err, "%q", bad)
	}
	var out, errb bytes.Buffer
	require.Equal(t, 22, run([]string{"rping", "-x"}, &out, &errb), "a bad option exits EINVAL as rping does")
	require.Contains(t, errb.String(), "unknown option -x")
	errb.Reset()
	require.Equal(t, 22, run([]string{"ibgo", "rping", "-S", "1", "-s"}, &out, &errb))
	require.Contains(t, errb.String(), "Invalid size 1")
}

// The ping buffer of rping_test_client: ping 0 starts at 'A', the letters
// run to 'z' and wrap to 'A', the last byte is NUL.
func TestRpingFill(t *testing.T) {
	b := make([]byte, 64)
	rpingFill(b, 0, 'A')
	require.Equal(t, "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr", string(cstr(b)))
	require.Zero(t, b[63])
	rpingFill(b, 12, 'y')
	require.Equal(t, "rdma-ping-12: yzABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmno", string(cstr(b)))
}

func TestRpingInfo(t *testing.T) {
	b := make([]byte, 16)
	rpingInfo{addr: 0x0102030405060708, rkey: 0x0a0b0c0d, size: 64}.encode(b)
	require.Equal(t, []byte{1, 2, 3, 4, 5, 6, 7, 8, 0x0a, 0x0b, 0x0c, 0x0d, 0, 0, 0, 64}, b, "big-endian as htobe64/htobe32")
	info, err := parseRpingInfo(b)
	require.NoError(t, err)
	require.Equal(t, rpingInfo{addr: 0x0102030405060708, rkey: 0x0a0b0c0d, size: 64}, info)
	_, err = parseRpingInfo(b[:15])
	require.EqualError(t, err, "Received bogus data, size 15")
}

func FuzzRpingInfo(f *testing.F) {
	f.Add(make([]byte, 16))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := parseRpingInfo(b)
		if err != nil {
			require.NotEqual(t, 16, len(b))
			return
		}
		out := make([]byte, 16)
		info.encode(out)
		require.Equal(t, b, out)
	})
}
