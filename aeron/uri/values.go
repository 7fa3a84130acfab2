package uri

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// ParseSize parses a byte size as Aeron does (aeron_parse_size64): decimal
// digits with an optional k, m or g suffix (case-insensitive, powers of 1024).
func ParseSize(s string) (int64, error) {
	if s == "" {
		return 0, errors.New("empty size")
	}
	mult := int64(1)
	switch s[len(s)-1] {
	case 'k', 'K':
		mult = 1 << 10
	case 'm', 'M':
		mult = 1 << 20
	case 'g', 'G':
		mult = 1 << 30
	}
	digits := s
	if mult != 1 {
		digits = s[:len(s)-1]
	}
	v, err := parseDigits(digits)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size (digits with an optional k, m or g suffix)", s)
	}
	if v > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q overflows int64", s)
	}
	return v * mult, nil
}

// ParseDuration parses a duration as Aeron does (aeron_parse_duration_ns):
// decimal digits, nanoseconds unless suffixed with ns, us, ms or s.
func ParseDuration(s string) (time.Duration, error) {
	unit := time.Nanosecond
	digits := s
	lower := strings.ToLower(s)
	switch {
	case strings.HasSuffix(lower, "ns"):
		digits = s[:len(s)-2]
	case strings.HasSuffix(lower, "us"):
		digits, unit = s[:len(s)-2], time.Microsecond
	case strings.HasSuffix(lower, "ms"):
		digits, unit = s[:len(s)-2], time.Millisecond
	case strings.HasSuffix(lower, "s"):
		digits, unit = s[:len(s)-1], time.Second
	}
	v, err := parseDigits(digits)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (digits with an optional ns, us, ms or s suffix)", s)
	}
	if v > math.MaxInt64/int64(unit) {
		return 0, fmt.Errorf("duration %q overflows int64 nanoseconds", s)
	}
	return time.Duration(v) * unit, nil
}

func parseDigits(s string) (int64, error) {
	if s == "" {
		return 0, errors.New("no digits")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("not a digit")
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

// ParseBool accepts the spellings aeron_parse_bool accepts as whole words:
// true, on, 1 and false, off, 0.
func ParseBool(s string) (bool, error) {
	switch s {
	case "true", "on", "1":
		return true, nil
	case "false", "off", "0":
		return false, nil
	}
	return false, fmt.Errorf("%q is not true or false", s)
}

// Address is a host and optional port: the form of endpoint and control.
type Address struct {
	Host    string     // name or IP literal, without brackets or zone
	Zone    string     // IPv6 scope, after '%'
	Port    uint16     // valid when HasPort
	HasPort bool       //
	IP      netip.Addr // the host as an IP literal; invalid for a name
}

// Multicast reports whether the host is a multicast IP literal.
func (a Address) Multicast() bool { return a.IP.IsValid() && a.IP.IsMulticast() }

// String formats the address as it appears in a URI.
func (a Address) String() string {
	h := a.Host
	if a.IP.Is6() {
		h = "[" + h
		if a.Zone != "" {
			h += "%" + a.Zone
		}
		h += "]"
	}
	if a.HasPort {
		h += ":" + strconv.Itoa(int(a.Port))
	}
	return h
}

// ParseAddress parses host[:port], with IPv6 literals in brackets and an
// optional %zone inside them (aeron_address_split).
func ParseAddress(s string) (Address, error) {
	var a Address
	if s == "" {
		return a, errors.New("empty address")
	}
	host, port := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return a, fmt.Errorf("%q: '[' without ']'", s)
		}
		host = s[1:end]
		rest := s[end+1:]
		switch {
		case rest == "":
		case rest[0] == ':':
			port = rest[1:]
			if port == "" {
				return a, fmt.Errorf("%q: ':' without a port", s)
			}
		default:
			return a, fmt.Errorf("%q: unexpected %q after ']'", s, rest)
		}
		if i := strings.IndexByte(host, '%'); i >= 0 {
			host, a.Zone = host[:i], host[i+1:]
			if a.Zone == "" {
				return a, fmt.Errorf("%q: empty IPv6 zone", s)
			}
		}
		ip, err := netip.ParseAddr(host)
		if err != nil || !ip.Is6() {
			return a, fmt.Errorf("%q: %q is not an IPv6 address", s, host)
		}
		a.IP = ip
	} else {
		if strings.ContainsAny(s, "[]") {
			return a, fmt.Errorf("%q: ']' without '['", s)
		}
		if i := strings.LastIndexByte(s, ':'); i >= 0 {
			host, port = s[:i], s[i+1:]
			if strings.IndexByte(host, ':') >= 0 {
				return a, fmt.Errorf("%q: IPv6 addresses must be in brackets, e.g. [::1]:40456", s)
			}
			if port == "" {
				return a, fmt.Errorf("%q: ':' without a port", s)
			}
		}
		if host == "" {
			return a, fmt.Errorf("%q: empty host", s)
		}
		if ip, err := netip.ParseAddr(host); err == nil {
			a.IP = ip
		} else if strings.ContainsAny(host, " \t%/") {
			return a, fmt.Errorf("%q: %q is neither an IP address nor a host name", s, host)
		}
	}
	a.Host = host
	if port != "" {
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil || !isDigits(port) {
			return a, fmt.Errorf("%q: port %q is not a number in 0..65535", s, port)
		}
		a.Port, a.HasPort = uint16(p), true
	}
	return a, nil
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// Interface is the form of the interface key: addr[:port][/prefix].
type Interface struct {
	Address
	PrefixLen int // -1 when absent
}

// ParseInterface parses addr[:port][/prefix] (aeron_interface_split). The
// prefix is 0..32 for IPv4 and 0..128 for IPv6 literals.
func ParseInterface(s string) (Interface, error) {
	in := Interface{PrefixLen: -1}
	addr := s
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		addr = s[:i]
		p := s[i+1:]
		n, err := strconv.Atoi(p)
		if err != nil || !isDigits(p) {
			return in, fmt.Errorf("%q: subnet prefix %q is not a number", s, p)
		}
		in.PrefixLen = n
	}
	a, err := ParseAddress(addr)
	if err != nil {
		return in, err
	}
	in.Address = a
	if in.PrefixLen >= 0 {
		maxBits := 32
		if a.IP.Is6() {
			maxBits = 128
		}
		if in.PrefixLen > maxBits {
			return in, fmt.Errorf("%q: subnet prefix /%d exceeds %d bits", s, in.PrefixLen, maxBits)
		}
	}
	return in, nil
}
