package uri

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseValid(t *testing.T) {
	for _, s := range []string{
		"aeron:ipc",
		"aeron:ipc?term-length=64m",
		"aeron:udp?endpoint=localhost:20121",
		"aeron:udp?endpoint=localhost:20121|term-length=64k",
		"aeron:udp?endpoint=localhost:20121|cc=cubic",
		"aeron:udp?endpoint=224.0.1.1:40456|interface=192.168.1.0/24|ttl=16",
		"aeron:udp?endpoint=[::1]:40456|interface=[fe80::1%eth0]:0/64",
		"aeron:udp?control=10.0.0.1:40457|control-mode=dynamic|fc=tagged,g:123/3,t:5s",
		"aeron:udp?control-mode=manual",
		"aeron:udp?control-mode=response|control=localhost:10001",
		"aeron:udp?tags=1,2",
		"aeron:udp?tags=,2",
		"aeron:udp?endpoint=host:1|mtu=8k|term-length=1g|init-term-id=-5|term-id=10|term-offset=1024",
		"aeron:udp?endpoint=h:1|session-id=tag:77|linger=5s|sparse=true|eos=false|tether=on|rejoin=0|reliable=1",
		"aeron:udp?endpoint=h:1|group=infer|gtag=-9|so-sndbuf=2m|so-rcvbuf=2097152|rcv-wnd=128k|pub-wnd=32k|term-length=64k",
		"aeron:udp?endpoint=h:1|nak-delay=100us|max-resend=256|ssc=true|untethered-window-limit-timeout=5000ms|untethered-resting-timeout=10s|untethered-linger-timeout=1000000",
		"aeron:udp?endpoint=h:1|response-correlation-id=prototype|media-rcv-ts-offset=reserved|channel-rcv-ts-offset=0|channel-snd-ts-offset=8",
		"aeron:udp?endpoint=h:1|alias=my channel!|ats=false|stream-id=1001|fc=min|fc-unknown=x",
		"aeron-spy:aeron:udp?endpoint=localhost:20121",
		"aeron:ib?endpoint=192.168.1.10:40456",
		"aeron:ib?endpoint=192.168.1.10:40456|ib-qp=rc|mtu=65504",
		"aeron:ib?endpoint=224.0.1.1:40456|ib-qp=ud|mtu=4096",
		"aeron:udp?endpoint=localhost:20121|",
		"aeron:ipc?endpoint=ignored:1|cc=whatever",
	} {
		t.Run(s, func(t *testing.T) {
			u, err := Parse(s)
			require.NoError(t, err)
			again, err := Parse(u.String())
			require.NoError(t, err)
			require.Equal(t, u, again)
			require.Equal(t, strings.TrimSuffix(s, "|"), u.String())
			require.NoError(t, u.Validate())
		})
	}
}

func TestParseFields(t *testing.T) {
	u, err := Parse("aeron-spy:aeron:udp?endpoint=localhost:20121|term-length=64k|mtu=1408|linger=5s|sparse=true|typo-key=1")
	require.NoError(t, err)
	require.True(t, u.Spy)
	require.Equal(t, MediaUDP, u.Media)
	n, ok := u.Size(KeyTermLength)
	require.True(t, ok)
	require.Equal(t, int64(65536), n)
	n, _ = u.Size(KeyMTU)
	require.Equal(t, int64(1408), n)
	d, ok := u.Duration(KeyLinger)
	require.True(t, ok)
	require.Equal(t, int64(5*time.Second), d)
	b, ok := u.Bool(KeySparse)
	require.True(t, ok && b)
	_, ok = u.Bool(KeyEOS)
	require.False(t, ok)
	a, ok := u.Endpoint()
	require.True(t, ok)
	require.Equal(t, "localhost", a.Host)
	require.Equal(t, uint16(20121), a.Port)
	require.False(t, a.IP.IsValid())
	require.Equal(t, []Param{{"typo-key", "1"}}, u.Unknown())
	require.False(t, u.IsMulticast())
	require.Equal(t, IBQueuePairUD, (&ChannelURI{Media: MediaIB}).IBQueuePair())

	ipc, err := Parse("aeron:ipc?endpoint=x:1|term-length=64k")
	require.NoError(t, err)
	require.Equal(t, []Param{{"endpoint", "x:1"}}, ipc.Unknown(), "endpoint is kept but unused by aeron:ipc")

	u.Set(KeyMTU, "1000")
	require.ErrorContains(t, u.Validate(), "mtu=1000: must be a multiple of 32")
	u.Set(KeyMTU, "4096")
	u.Set("new", "v")
	require.NoError(t, u.Validate())
	u.Delete("new")
	u.Delete("absent")
	require.Equal(t, "aeron-spy:aeron:udp?endpoint=localhost:20121|term-length=64k|mtu=4096|linger=5s|sparse=true|typo-key=1", u.String())
	require.ErrorContains(t, (&ChannelURI{Media: "tcp"}).Validate(), `unknown media "tcp"`)
	require.ErrorContains(t, (&ChannelURI{Media: MediaUDP}).Validate(), "aeron:udp needs parameters")
	require.ErrorContains(t, (&ChannelURI{Media: MediaIPC, Params: []Param{{"a|b", "c"}}}).Validate(), "keys must be non-empty")
	require.ErrorContains(t, (&ChannelURI{Media: MediaIPC, Params: []Param{{"a", "c|d"}}}).Validate(), "values must be non-empty")
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ uri, want string }{
		// Syntax.
		{"udp?endpoint=x:1", `at index 0: channel URIs start with "aeron:"`},
		{"aeron:tcp?endpoint=x:1", `at index 6: unknown media "tcp": want udp, ipc or ib`},
		{"aeron:udpx?endpoint=x:1", `unknown media "udpx"`},
		{"aeron:ipcx", `unknown media "ipcx"`},
		{"aeron:udp", "aeron:udp needs parameters after '?'"},
		{"aeron:udp?=x", "at index 10: empty key not allowed"},
		{"aeron:udp?endpoint|x=1", `at index 18: invalid end of key "endpoint": '|' before '='`},
		{"aeron:udp?endpoint=x:1|mtu", `key "mtu" has no value (missing '=')`},
		{"aeron:udp?endpoint=", "endpoint=: empty value not allowed"},
		{"aeron:udp?endpoint=x:1|mtu=|a=b", "mtu=: empty value not allowed"},
		{"aeron:udp?endpoint=x:1|mtu=1408|mtu=4096", "mtu=4096: duplicate key"},
		{"aeron:ipc?" + strings.Repeat("a", 4090), "length 4100 exceeds the maximum of 4095"},
		// Per-key rules.
		{"aeron:udp?endpoint=x:1|mtu=1000", "mtu=1000: must be a multiple of 32 (FRAME_ALIGNMENT) greater than the 32-byte data header and at most 65504"},
		{"aeron:udp?endpoint=x:1|mtu=32", "mtu=32: must be a multiple of 32"},
		{"aeron:udp?endpoint=x:1|mtu=65536", "mtu=65536: must be a multiple of 32"},
		{"aeron:udp?endpoint=x:1|mtu=big", "mtu=big: must be"},
		{"aeron:ipc?term-length=100000", "term-length=100000: must be a power of two from 65536 (64k) to 1073741824 (1g)"},
		{"aeron:ipc?term-length=32k", "term-length=32k: must be a power of two"},
		{"aeron:ipc?term-length=2g", "term-length=2g: must be a power of two"},
		{"aeron:udp?endpoint=localhost", "endpoint=localhost: needs a port"},
		{"aeron:udp?endpoint=::1:40456", "endpoint=::1:40456: must be host:port or [ipv6]:port: \"::1:40456\": IPv6 addresses must be in brackets"},
		{"aeron:udp?endpoint=[::1:40456", "'[' without ']'"},
		{"aeron:udp?endpoint=[zz]:1", `"zz" is not an IPv6 address`},
		{"aeron:udp?endpoint=host:70000", `port "70000" is not a number in 0..65535`},
		{"aeron:udp?endpoint=host:", "':' without a port"},
		{"aeron:udp?endpoint=x:1|interface=10.0.0.1/33", "interface=10.0.0.1/33: must be address[:port][/prefix]: \"10.0.0.1/33\": subnet prefix /33 exceeds 32 bits"},
		{"aeron:udp?endpoint=x:1|interface=10.0.0.1/x", `subnet prefix "x" is not a number`},
		{"aeron:udp?endpoint=224.0.1.2:40456", "endpoint=224.0.1.2:40456: a multicast data address must be odd"},
		{"aeron:udp?endpoint=x:1|ttl=256", "ttl=256: must be an integer in 0..255"},
		{"aeron:udp?endpoint=x:1|tags=a", "tags=a: must be channelTag[,entityTag], each an int64"},
		{"aeron:udp?endpoint=x:1|tags=1,2,3", "tags=1,2,3: must be channelTag[,entityTag]"},
		{"aeron:udp?endpoint=x:1|tags=,", "tags=,: must give a channel tag or an entity tag"},
		{"aeron:udp?endpoint=x:1|control-mode=auto", "control-mode=auto: must be one of manual, dynamic, response"},
		{"aeron:udp?endpoint=x:1|control-mode=dynamic", "control-mode=dynamic: control-mode=dynamic needs an explicit control address"},
		{"aeron:udp?mtu=1408", "aeron:udp URIs must specify endpoint, control, tags, or control-mode=manual/response"},
		{"aeron:udp?endpoint=x:1|session-id=abc", "session-id=abc: must be an int32 or tag:<int64 tag>"},
		{"aeron:udp?endpoint=x:1|session-id=tag:x", "session-id=tag:x: must be an int32"},
		{"aeron:udp?endpoint=x:1|linger=5m", "linger=5m: must be a duration"},
		{"aeron:udp?endpoint=x:1|linger=-1", "linger=-1: must be a duration"},
		{"aeron:udp?endpoint=x:1|linger=99999999999s", "linger=99999999999s: must be a duration"},
		{"aeron:udp?endpoint=x:1|sparse=yes", "sparse=yes: must be true or false"},
		{"aeron:udp?endpoint=x:1|group=maybe", "group=maybe: must be one of true, false, infer"},
		{"aeron:udp?endpoint=x:1|gtag=1.5", "gtag=1.5: must be an integer"},
		{"aeron:udp?endpoint=x:1|fc=fast", "fc=fast: must be max, min or tagged"},
		{"aeron:udp?endpoint=x:1|fc=min,t:forever", `bad timeout "t:forever"`},
		{"aeron:udp?endpoint=x:1|fc=tagged,g:x", `bad group tag "g:x"`},
		{"aeron:udp?endpoint=x:1|fc=tagged,g:1/-2", `bad group size "g:1/-2"`},
		{"aeron:udp?endpoint=x:1|fc=tagged,g:", "empty g: option"},
		{"aeron:udp?endpoint=x:1|fc=max,q:1", `unknown option "q:1"`},
		{"aeron:udp?endpoint=x:1|cc=bbr", "cc=bbr: must be one of static, cubic"},
		{"aeron:udp?endpoint=x:1|so-rcvbuf=0", "so-rcvbuf=0: must be a size in 1..2147483647 bytes"},
		{"aeron:udp?endpoint=x:1|rcv-wnd=4g", "rcv-wnd=4g: must be a size"},
		{"aeron:udp?endpoint=x:1|max-resend=0", "max-resend=0: must be an integer in 1..256"},
		{"aeron:udp?endpoint=x:1|max-resend=257", "max-resend=257: must be an integer in 1..256"},
		{"aeron:udp?endpoint=x:1|response-correlation-id=x", "response-correlation-id=x: must be an int64 correlation id or prototype"},
		{"aeron:udp?endpoint=x:1|media-rcv-ts-offset=-8", "media-rcv-ts-offset=-8: must be reserved or a non-negative payload offset"},
		{"aeron:udp?endpoint=x:1|media-rcv-ts-offset=reserved|channel-snd-ts-offset=reserved", "channel-snd-ts-offset=reserved: media-rcv-ts-offset and channel-snd-ts-offset overlap"},
		{"aeron:udp?endpoint=x:1|channel-rcv-ts-offset=8|channel-snd-ts-offset=12", "channel-snd-ts-offset=12: channel-rcv-ts-offset and channel-snd-ts-offset overlap"},
		{"aeron:udp?endpoint=x:1|ats=true", "ats=true: Aeron Transport Security is an Aeron Premium feature"},
		{"aeron:udp?endpoint=x:1|stream-id=3000000000", "stream-id=3000000000: must be an integer in -2147483648..2147483647"},
		// Cross-key rules.
		{"aeron:ipc?init-term-id=1|term-id=2", "term-offset (not set): init-term-id, term-id and term-offset must be used as a complete set"},
		{"aeron:ipc?term-id=2", "init-term-id (not set): init-term-id, term-id and term-offset must be used as a complete set"},
		{"aeron:ipc?init-term-id=1", "term-id (not set): init-term-id, term-id and term-offset must be used as a complete set"},
		{"aeron:ipc?init-term-id=-2147483648|term-id=2147483647|term-offset=0", "term-id=2147483647: term-id - init-term-id = 4294967295 does not fit an int32"},
		{"aeron:ipc?init-term-id=1|term-id=2|term-offset=33", "term-offset=33: must be a multiple of 32"},
		{"aeron:ipc?init-term-id=1|term-id=2|term-offset=131072|term-length=64k", "term-offset=131072: must not exceed term-length=65536"},
		{"aeron:ipc?pub-wnd=1k|mtu=8k", "pub-wnd=1k: cannot be less than mtu=8192"},
		{"aeron:ipc?pub-wnd=64k|term-length=64k", "pub-wnd=64k: must not exceed half of term-length=65536"},
		{"aeron-spy:aeron:ipc", "aeron-spy: spies on network publications"},
		// aeron:ib.
		{"aeron:udp?endpoint=x:1|ib-qp=rc", "ib-qp=rc: ib-qp applies only to aeron:ib, not aeron:udp"},
		{"aeron:ipc?ib-qp=ud", "ib-qp=ud: ib-qp applies only to aeron:ib, not aeron:ipc"},
		{"aeron:ib?endpoint=x:1|ib-qp=uc", "ib-qp=uc: must be one of ud, rc"},
		{"aeron:ib?endpoint=224.0.1.1:40456|ib-qp=rc", "endpoint=224.0.1.1:40456: multicast needs ib-qp=ud: a reliable connection (ib-qp=rc) joins exactly two queue pairs"},
		{"aeron:ib?endpoint=[ff02::1]:40456|ib-qp=rc", "multicast needs ib-qp=ud"},
		{"aeron:ib?control=10.0.0.1:40457|control-mode=dynamic|ib-qp=rc", "control=10.0.0.1:40457: multi-destination-cast needs ib-qp=ud"},
		{"aeron:ib?endpoint=10.0.0.1:40456|control=10.0.0.1:40457|ib-qp=rc", "control=10.0.0.1:40457: multi-destination-cast needs ib-qp=ud"},
		{"aeron:ib?control-mode=manual|ib-qp=rc", "control-mode=manual: multi-destination-cast needs ib-qp=ud"},
		{"aeron:ib?endpoint=x:1|mtu=8k", "mtu=8k: with ib-qp=ud an Aeron datagram is one IB message, at most the 4096-byte path MTU"},
		{"aeron:ib", "aeron:ib needs parameters"},
		{"aeron:ib?mtu=1408", "aeron:ib URIs must specify endpoint, control, tags, or control-mode=manual/response"},
	} {
		t.Run(tc.uri[:min(len(tc.uri), 60)], func(t *testing.T) {
			_, err := Parse(tc.uri)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			var ue *Error
			require.ErrorAs(t, err, &ue)
			require.Equal(t, tc.uri, ue.URI)
		})
	}
}

func TestValueParsers(t *testing.T) {
	for s, want := range map[string]int64{"0": 0, "64k": 65536, "64K": 65536, "2m": 2 << 20, "1g": 1 << 30, "1G": 1 << 30, "1408": 1408} {
		got, err := ParseSize(s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
	for _, s := range []string{"", "k", "-1", "+5", " 5", "5x", "9223372036854775807k", "1.5m"} {
		_, err := ParseSize(s)
		require.Error(t, err, s)
	}
	for s, want := range map[string]time.Duration{"5": 5, "5ns": 5, "5us": 5 * time.Microsecond, "5MS": 5 * time.Millisecond, "5s": 5 * time.Second, "0s": 0} {
		got, err := ParseDuration(s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
	for _, s := range []string{"", "s", "5m", "5h", "ms", "-1s", "10000000000s"} {
		_, err := ParseDuration(s)
		require.Error(t, err, s)
	}
	for s, want := range map[string]bool{"true": true, "on": true, "1": true, "false": false, "off": false, "0": false} {
		got, err := ParseBool(s)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err := ParseBool("truex")
	require.Error(t, err)

	a, err := ParseAddress("[fe80::1%eth0]:40456")
	require.NoError(t, err)
	require.Equal(t, Address{Host: "fe80::1", Zone: "eth0", Port: 40456, HasPort: true, IP: a.IP}, a)
	require.Equal(t, "[fe80::1%eth0]:40456", a.String())
	a, err = ParseAddress("10.1.2.3")
	require.NoError(t, err)
	require.False(t, a.HasPort)
	require.Equal(t, "10.1.2.3", a.String())
	a, err = ParseAddress("239.1.1.1:5")
	require.NoError(t, err)
	require.True(t, a.Multicast())
	for _, s := range []string{"", ":1", "[::1]x", "[::1%]:1", "a]:1", "has space:1", "[10.0.0.1]:1"} {
		_, err := ParseAddress(s)
		require.Error(t, err, s)
	}
	in, err := ParseInterface("192.168.0.1:4000/24")
	require.NoError(t, err)
	require.Equal(t, 24, in.PrefixLen)
	require.Equal(t, uint16(4000), in.Port)
	in, err = ParseInterface("[::]/128")
	require.NoError(t, err)
	require.Equal(t, 128, in.PrefixLen)
	in, err = ParseInterface("eth0")
	require.NoError(t, err)
	require.Equal(t, -1, in.PrefixLen)
	_, err = ParseInterface("[::]/129")
	require.Error(t, err)
	require.True(t, Known(MediaIB, KeyIBQueuePair))
	require.False(t, Known(MediaUDP, KeyIBQueuePair))
	require.False(t, Known(MediaIPC, KeyEndpoint))
}

// FuzzParse: Parse never panics; what it accepts formats back to a string
// that parses to the same URI (parse→format→parse stable), and Validate
// agrees with Parse.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"aeron:udp?endpoint=localhost:20121|term-length=64k",
		"aeron:udp?endpoint=localhost:20121|cc=cubic",
		"aeron:ipc",
		"aeron:ipc?term-length=64m|init-term-id=1|term-id=2|term-offset=64",
		"aeron-spy:aeron:udp?endpoint=224.0.1.1:40456|interface=10.0.0.0/8|ttl=3",
		"aeron:ib?endpoint=[fe80::1%ib0]:40456|ib-qp=rc|mtu=8k",
		"aeron:udp?control=h:1|control-mode=dynamic|fc=tagged,g:1/2,t:1s",
		"aeron:udp?endpoint=x:1|media-rcv-ts-offset=reserved|channel-snd-ts-offset=16",
		"aeron:udp?tags=1,2|session-id=tag:3|pub-wnd=64k|mtu=1408",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := Parse(s)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		out := u.String()
		v, err := Parse(out)
		if err != nil {
			t.Fatalf("%q parsed, but its format %q does not: %v", s, out, err)
		}
		if v.String() != out || v.Spy != u.Spy || v.Media != u.Media || len(v.Params) != len(u.Params) {
			t.Fatalf("parse→format→parse changed %q: %q", out, v.String())
		}
		if err := u.Validate(); err != nil {
			t.Fatalf("Parse accepted %q but Validate refuses it: %v", s, err)
		}
	})
}
