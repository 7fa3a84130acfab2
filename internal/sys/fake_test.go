package sys

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

type recFake struct {
	raw    int
	closed []int
	writes [][]byte
	ioctls []uintptr
	page   []byte
}

func (f *recFake) Claims(path string) bool  { return path == "/fake/uverbs0" }
func (f *recFake) Opened(_ string, raw int) { f.raw = raw }
func (f *recFake) Closed(raw int)           { f.closed = append(f.closed, raw) }
func (f *recFake) mine(raw int) bool        { return raw == f.raw }
func (f *recFake) Ioctl(raw int, req uintptr, _ unsafe.Pointer) (bool, error) {
	if !f.mine(raw) {
		return false, nil
	}
	f.ioctls = append(f.ioctls, req)
	return true, NewErrno(ENOTTY)
}
func (f *recFake) Write(raw int, b []byte) (bool, error) {
	if !f.mine(raw) {
		return false, nil
	}
	f.writes = append(f.writes, append([]byte(nil), b...))
	return true, nil
}
func (f *recFake) Mmap(raw int, _ int64, n, _, _ int) ([]byte, bool, error) {
	if !f.mine(raw) {
		return nil, false, nil
	}
	b, err := MmapAnon(n, 0)
	f.page = b
	return b, true, err
}

func TestFakeKernelSeam(t *testing.T) {
	f := &recFake{raw: -2}
	restore, err := InstallFakeKernel(f)
	require.NoError(t, err)
	defer restore()
	_, err = InstallFakeKernel(f)
	require.Error(t, err, "a second fake must be refused")

	fd, err := Open("/fake/uverbs0", O_RDWR)
	require.NoError(t, err)
	require.Equal(t, f.raw, fd.Int())
	require.NoError(t, Write(fd, Buf{b: []byte{1, 2, 3, 4}}))
	require.Equal(t, [][]byte{{1, 2, 3, 4}}, f.writes)
	// The doorbell's lean path hands a fake's descriptor to the fake too.
	require.NoError(t, WriteRaw(fd, Buf{b: []byte{5, 6}}))
	require.Equal(t, [][]byte{{1, 2, 3, 4}, {5, 6}}, f.writes)
	var x [8]byte
	require.ErrorIs(t, Ioctl(fd, 0x1234, unsafe.Pointer(&x)), ENOTTY)
	require.Equal(t, []uintptr{0x1234}, f.ioctls)
	m, err := Mmap(fd, 0, Pagesize, PROT_READ|PROT_WRITE, MAP_SHARED)
	require.NoError(t, err)
	m[0] = 7
	require.Equal(t, byte(7), f.page[0], "the test sees the mapping the provider writes")
	require.NoError(t, Munmap(m))
	raw := fd.Int()
	require.NoError(t, fd.Close())
	require.Equal(t, []int{raw}, f.closed)

	// Unclaimed paths still reach the kernel.
	_, err = Open("/nonexistent/ibgo-fake", O_RDONLY)
	require.Error(t, err)
}
