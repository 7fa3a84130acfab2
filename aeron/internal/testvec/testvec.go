// Package testvec gives tests the Aeron reference vectors: real captures and
// shared-memory files written by the Aeron C media driver 1.48 (see
// testdata/README.md). It is imported only by tests.
package testvec

import (
	"bytes"
	"compress/gzip"
	"embed"
	"fmt"
	"io"
	"sync"
)

// Vector file names.
const (
	LossCubicPcap        = "udp-loss-cubic.pcap"
	ResponseChannelPcap  = "udp-response-channel.pcap"
	CnC                  = "cnc.dat"
	PublicationLogBuffer = "publication.logbuffer"
	ImageLogBuffer       = "image.logbuffer"
)

//go:embed testdata/*.gz
var files embed.FS

var (
	mu    sync.Mutex
	cache = map[string][]byte{}
)

// Bytes returns the uncompressed contents of a vector. The slice is shared:
// callers that modify it must copy it first (Copy does).
func Bytes(name string) ([]byte, error) {
	mu.Lock()
	defer mu.Unlock()
	if b, ok := cache[name]; ok {
		return b, nil
	}
	gz, err := files.ReadFile("testdata/" + name + ".gz")
	if err != nil {
		return nil, fmt.Errorf("testvec: %w", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("testvec: %s: %w", name, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("testvec: %s: %w", name, err)
	}
	cache[name] = b
	return b, nil
}

// Gzipped returns the compressed file as stored.
func Gzipped(name string) ([]byte, error) { return files.ReadFile("testdata/" + name + ".gz") }

// MustBytes is Bytes for tests: it panics if the vector is missing, which
// can only be a broken checkout.
func MustBytes(name string) []byte {
	b, err := Bytes(name)
	if err != nil {
		panic(err)
	}
	return b
}

// Copy returns a private copy of a vector in memory aligned for atomics.
func Copy(name string, alloc func(int) []byte) []byte {
	b := MustBytes(name)
	c := alloc(len(b))
	copy(c, b)
	return c
}
