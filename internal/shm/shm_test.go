package shm

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAllocAligned(t *testing.T) {
	for _, n := range []int{1, 7, 64, 100, 4096} {
		b := Alloc(n)
		require.Len(t, b, n)
		require.True(t, Aligned(b, 64), "n=%d", n)
		for _, c := range b {
			require.Zero(t, c)
		}
	}
	require.Empty(t, Alloc(0))
}

func TestAtomicsRoundTrip(t *testing.T) {
	b := Alloc(64)
	StoreInt32(b, 4, -7)
	require.Equal(t, int32(-7), LoadInt32(b, 4))
	require.Equal(t, int32(-4), AddInt32(b, 4, 3))
	require.True(t, CompareAndSwapInt32(b, 4, -4, 9))
	require.False(t, CompareAndSwapInt32(b, 4, -4, 10))
	require.Equal(t, []byte{9, 0, 0, 0}, b[4:8])

	StoreInt64(b, 8, 1<<40|5)
	require.Equal(t, int64(1<<40|5), LoadInt64(b, 8))
	require.Equal(t, int64(1<<40|6), AddInt64(b, 8, 1))
	require.True(t, CompareAndSwapInt64(b, 8, 1<<40|6, -1))
	require.Equal(t, int64(-1), Int64At(b, 8).Load())
	Int32At(b, 16).Store(0x01020304)
	require.Equal(t, []byte{4, 3, 2, 1}, b[16:20], "little-endian layout")
}

func TestCheckPanicsOnProgrammerError(t *testing.T) {
	b := Alloc(16)
	require.PanicsWithValue(t, "shm: 8-byte access at offset 12 outside buffer of 16 bytes", func() { LoadInt64(b, 12) })
	require.PanicsWithValue(t, "shm: 4-byte access at offset -4 outside buffer of 16 bytes", func() { LoadInt32(b, -4) })
	require.PanicsWithValue(t, "shm: 8-byte access at offset 4 is not 8-byte aligned", func() { LoadInt64(b, 4) })
}

func TestStoreLoadBytes(t *testing.T) {
	b := Alloc(64)
	for i := range b {
		b[i] = 0xee
	}
	src := []byte("hello, aeron") // 12 bytes: 2 words, last half zero-filled
	StoreBytes(b, 8, src)
	require.Equal(t, src, b[8:20])
	require.Equal(t, []byte{0, 0, 0, 0}, b[20:24])
	require.Equal(t, byte(0xee), b[24])
	dst := make([]byte, len(src))
	LoadBytes(dst, b, 8)
	require.Equal(t, src, dst)
	StoreBytes(b, 0, nil)
	LoadBytes(nil, b, 0)
	require.Panics(t, func() { StoreBytes(b, 56, src) })
}

func TestConcurrentAdd(t *testing.T) {
	b := Alloc(8)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				AddInt64(b, 0, 1)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int64(4000), LoadInt64(b, 0))
}

func TestMapCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.dat")
	m, err := Create(path, 8192)
	require.NoError(t, err)
	require.Len(t, m.Bytes(), 8192)
	require.True(t, Aligned(m.Bytes(), 4096))
	StoreInt64(m.Bytes(), 4096, 42)
	require.NoError(t, m.Close())
	require.NoError(t, m.Close(), "Close is idempotent")

	r, err := Map(path, false)
	require.NoError(t, err)
	require.Equal(t, int64(42), LoadInt64(r.Bytes(), 4096))
	require.Equal(t, path, r.Path())
	require.NoError(t, r.Close())

	_, err = Map(filepath.Join(t.TempDir(), "missing"), false)
	require.ErrorIs(t, err, os.ErrNotExist)

	empty := filepath.Join(t.TempDir(), "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	_, err = Map(empty, false)
	require.ErrorContains(t, err, "file is empty")
	_, err = Create(empty, 0)
	require.ErrorContains(t, err, "size 0 must be positive")
}
