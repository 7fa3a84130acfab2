package uri

import (
	"fmt"
	"strings"
)

// Media is the transport named after "aeron:".
type Media string

// Media understood by ibgo.
const (
	MediaUDP Media = "udp"
	MediaIPC Media = "ipc"
	MediaIB  Media = "ib" // ibgo: Aeron frames over InfiniBand/RoCE verbs
)

const (
	scheme    = "aeron:"
	spyPrefix = "aeron-spy:"
	// MaxLength is the longest URI Aeron accepts (AERON_URI_MAX_LENGTH less
	// the NUL).
	MaxLength = 4095
)

// Param is one key=value pair.
type Param struct {
	Key, Value string
}

// ChannelURI is a parsed channel. Params keep the order they were written
// in; String formats them back in that order.
type ChannelURI struct {
	Spy    bool // written with the aeron-spy: prefix
	Media  Media
	Params []Param
}

// Error is a URI that could not be parsed or breaks a rule. Key and Value
// are empty for syntax errors, which give the character Index instead.
type Error struct {
	URI   string
	Key   string
	Value string
	Index int // position of a syntax error, -1 otherwise
	Rule  string
}

func (e *Error) Error() string {
	u := e.URI
	if len(u) > 200 {
		u = u[:200] + "…"
	}
	switch {
	case e.Key != "" && e.Value == "" && e.Index < 0:
		return fmt.Sprintf("uri %q: %s (not set): %s", u, e.Key, e.Rule)
	case e.Key != "":
		return fmt.Sprintf("uri %q: %s=%s: %s", u, e.Key, e.Value, e.Rule)
	case e.Index >= 0:
		return fmt.Sprintf("uri %q: at index %d: %s", u, e.Index, e.Rule)
	}
	return fmt.Sprintf("uri %q: %s", u, e.Rule)
}

// Parse parses and validates a channel URI.
func Parse(s string) (*ChannelURI, error) {
	u, err := parseSyntax(s)
	if err != nil {
		return nil, err
	}
	if err := u.validate(s); err != nil {
		return nil, err
	}
	return u, nil
}

func parseSyntax(s string) (*ChannelURI, error) {
	syntaxErr := func(i int, format string, args ...any) error {
		return &Error{URI: s, Index: i, Rule: fmt.Sprintf(format, args...)}
	}
	if len(s) > MaxLength {
		return nil, &Error{URI: s, Index: -1, Rule: fmt.Sprintf("length %d exceeds the maximum of %d", len(s), MaxLength)}
	}
	u := &ChannelURI{}
	i := 0
	if strings.HasPrefix(s, spyPrefix) {
		u.Spy = true
		i = len(spyPrefix)
	}
	if !strings.HasPrefix(s[i:], scheme) {
		return nil, syntaxErr(i, "channel URIs start with %q (or %q)", scheme, spyPrefix+scheme)
	}
	i += len(scheme)
	end := strings.IndexByte(s[i:], '?')
	media := s[i:]
	if end >= 0 {
		media = s[i : i+end]
	}
	switch Media(media) {
	case MediaUDP, MediaIB:
		if end < 0 {
			return nil, syntaxErr(len(s), "aeron:%s needs parameters after '?', at least an endpoint", media)
		}
	case MediaIPC:
	default:
		return nil, syntaxErr(i, "unknown media %q: want udp, ipc or ib", media)
	}
	u.Media = Media(media)
	if end < 0 {
		return u, nil
	}
	i += end + 1
	seen := map[string]bool{}
	for i < len(s) {
		eq := strings.IndexAny(s[i:], "=|")
		if eq < 0 {
			return nil, syntaxErr(i, "key %q has no value (missing '=')", s[i:])
		}
		if s[i+eq] == '|' {
			return nil, syntaxErr(i+eq, "invalid end of key %q: '|' before '='", s[i:i+eq])
		}
		if eq == 0 {
			return nil, syntaxErr(i, "empty key not allowed")
		}
		key := s[i : i+eq]
		i += eq + 1
		bar := strings.IndexByte(s[i:], '|')
		val := s[i:]
		if bar >= 0 {
			val = s[i : i+bar]
		}
		if val == "" {
			return nil, &Error{URI: s, Key: key, Index: i, Rule: "empty value not allowed"}
		}
		if seen[key] {
			return nil, &Error{URI: s, Key: key, Value: val, Index: i, Rule: "duplicate key: Aeron's C driver would use the first value and its Java client the last"}
		}
		seen[key] = true
		u.Params = append(u.Params, Param{key, val})
		if bar < 0 {
			break
		}
		i += bar + 1 // a trailing '|' is accepted, as the C parser does
	}
	return u, nil
}

// String formats the URI: [aeron-spy:]aeron:media[?key=value|…].
func (u *ChannelURI) String() string {
	var b strings.Builder
	if u.Spy {
		b.WriteString(spyPrefix)
	}
	b.WriteString(scheme)
	b.WriteString(string(u.Media))
	for i, p := range u.Params {
		if i == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('|')
		}
		b.WriteString(p.Key)
		b.WriteByte('=')
		b.WriteString(p.Value)
	}
	return b.String()
}

// Get returns the value of key.
func (u *ChannelURI) Get(key string) (string, bool) {
	for _, p := range u.Params {
		if p.Key == key {
			return p.Value, true
		}
	}
	return "", false
}

// Has reports whether key is set.
func (u *ChannelURI) Has(key string) bool { _, ok := u.Get(key); return ok }

// Set sets key to value, replacing an existing value in place or appending.
// Call Validate afterwards to check the result.
func (u *ChannelURI) Set(key, value string) {
	for i := range u.Params {
		if u.Params[i].Key == key {
			u.Params[i].Value = value
			return
		}
	}
	u.Params = append(u.Params, Param{key, value})
}

// Delete removes key.
func (u *ChannelURI) Delete(key string) {
	for i := range u.Params {
		if u.Params[i].Key == key {
			u.Params = append(u.Params[:i], u.Params[i+1:]...)
			return
		}
	}
}

// Validate checks a URI built or changed in code with the rules Parse applies.
func (u *ChannelURI) Validate() error {
	s := u.String()
	if len(s) > MaxLength {
		return &Error{URI: s, Index: -1, Rule: fmt.Sprintf("length %d exceeds the maximum of %d", len(s), MaxLength)}
	}
	seen := map[string]bool{}
	for _, p := range u.Params {
		if p.Key == "" || strings.ContainsAny(p.Key, "=|") {
			return &Error{URI: s, Key: p.Key, Value: p.Value, Index: -1, Rule: "keys must be non-empty and contain neither '=' nor '|'"}
		}
		if p.Value == "" || strings.IndexByte(p.Value, '|') >= 0 {
			return &Error{URI: s, Key: p.Key, Value: p.Value, Index: -1, Rule: "values must be non-empty and not contain '|'"}
		}
		if seen[p.Key] {
			return &Error{URI: s, Key: p.Key, Value: p.Value, Index: -1, Rule: "duplicate key"}
		}
		seen[p.Key] = true
	}
	switch u.Media {
	case MediaUDP, MediaIB:
		if len(u.Params) == 0 {
			return &Error{URI: s, Index: -1, Rule: fmt.Sprintf("aeron:%s needs parameters, at least an endpoint", u.Media)}
		}
	case MediaIPC:
	default:
		return &Error{URI: s, Index: -1, Rule: fmt.Sprintf("unknown media %q: want udp, ipc or ib", u.Media)}
	}
	return u.validate(s)
}

// Unknown returns the parameters this media does not use, in order. Aeron
// keeps such keys without complaint (additional_params), and so does ibgo;
// the list lets tools point out probable typos.
func (u *ChannelURI) Unknown() []Param {
	var out []Param
	for _, p := range u.Params {
		if k, ok := keys[p.Key]; !ok || !k.media.has(u.Media) {
			out = append(out, p)
		}
	}
	return out
}

// IsMulticast reports whether the endpoint is a multicast IP literal.
func (u *ChannelURI) IsMulticast() bool {
	v, ok := u.Get(KeyEndpoint)
	if !ok {
		return false
	}
	a, err := ParseAddress(v)
	return err == nil && a.Multicast()
}
