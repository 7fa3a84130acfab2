// Package nl is a minimal NETLINK_RDMA ("rdma" netlink, nldev client) client:
// device and port listing, char-device lookup (which gives the uverbs driver
// id), system attributes (copy-on-fork), resource summaries for leak checks,
// and rxe link add/delete. It is what `rdma dev`, `rdma link` and
// `rdma res` of iproute2 speak (kernel drivers/infiniband/core/nldev.c).
package nl

import (
	"encoding/binary"
	"errors"
	"fmt"
)

var le = binary.LittleEndian

// ErrMalformed reports a netlink message or attribute that does not parse.
var ErrMalformed = errors.New("malformed netlink data")

const (
	nlaHdrLen   = 4
	nlaFNested  = 1 << 15
	nlaFNetByte = 1 << 14
	nlaTypeMask = ^uint16(nlaFNested | nlaFNetByte)
)

func align4(n int) int { return (n + 3) &^ 3 }

// Encoder appends netlink attributes to a buffer.
type Encoder struct{ b []byte }

func (e *Encoder) put(typ uint16, v []byte) {
	n := nlaHdrLen + len(v)
	var h [4]byte
	le.PutUint16(h[0:], uint16(n))
	le.PutUint16(h[2:], typ)
	e.b = append(e.b, h[:]...)
	e.b = append(e.b, v...)
	for len(e.b)%4 != 0 {
		e.b = append(e.b, 0)
	}
}

// U32 appends a u32 attribute.
func (e *Encoder) U32(typ uint16, v uint32) {
	var b [4]byte
	le.PutUint32(b[:], v)
	e.put(typ, b[:])
}

// String appends a NUL-terminated string attribute.
func (e *Encoder) String(typ uint16, s string) { e.put(typ, append([]byte(s), 0)) }

// Bytes returns the encoded attributes.
func (e *Encoder) Bytes() []byte { return e.b }

// Attr is one decoded attribute.
type Attr struct {
	Type uint16
	Data []byte
}

// ParseAttrs splits b into attributes. It never reads outside b.
func ParseAttrs(b []byte) ([]Attr, error) {
	var out []Attr
	for len(b) > 0 {
		if len(b) < nlaHdrLen {
			return nil, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(b))
		}
		n := int(le.Uint16(b[0:]))
		typ := le.Uint16(b[2:]) & nlaTypeMask
		if n < nlaHdrLen || n > len(b) {
			return nil, fmt.Errorf("%w: attribute %d has length %d with %d bytes left", ErrMalformed, typ, n, len(b))
		}
		out = append(out, Attr{typ, b[nlaHdrLen:n]})
		if a := align4(n); a < len(b) {
			b = b[a:]
		} else {
			b = nil
		}
	}
	return out, nil
}

// attrSet is a decoded message indexed by type (the first of a type wins).
type attrSet map[uint16][]byte

func toSet(as []Attr) attrSet {
	s := attrSet{}
	for _, a := range as {
		if _, ok := s[a.Type]; !ok {
			s[a.Type] = a.Data
		}
	}
	return s
}

func (s attrSet) u8(t uint16) (uint8, bool) {
	d, ok := s[t]
	if !ok || len(d) < 1 {
		return 0, false
	}
	return d[0], true
}

func (s attrSet) u32(t uint16) (uint32, bool) {
	d, ok := s[t]
	if !ok || len(d) < 4 {
		return 0, false
	}
	return le.Uint32(d), true
}

// u64 reads an unsigned attribute of 8, 4, 2 or 1 bytes: the kernel is not
// always faithful to the width rdma_netlink.h documents (it puts
// UVERBS_DRIVER_ID, documented u64, as a u32).
func (s attrSet) u64(t uint16) (uint64, bool) {
	d, ok := s[t]
	if !ok {
		return 0, false
	}
	switch {
	case len(d) >= 8:
		return le.Uint64(d), true
	case len(d) >= 4:
		return uint64(le.Uint32(d)), true
	case len(d) >= 2:
		return uint64(le.Uint16(d)), true
	case len(d) == 1:
		return uint64(d[0]), true
	}
	return 0, false
}

func (s attrSet) str(t uint16) string {
	d := s[t]
	for i, c := range d {
		if c == 0 {
			return string(d[:i])
		}
	}
	return string(d)
}
