package mmio

import (
	"testing"
	"unsafe"
)

// The stores must write exactly their width at the address and nothing
// around it.
func TestStores(t *testing.T) {
	var buf [4]uint64
	for i := range buf {
		buf[i] = 0xa5a5a5a5a5a5a5a5
	}
	Store64(unsafe.Pointer(&buf[1]), 0x0102030405060708)
	Store32(unsafe.Pointer(&buf[2]), 0x11223344)
	b := (*[32]byte)(unsafe.Pointer(&buf[0]))
	want := [32]byte{
		0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5,
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
		0x44, 0x33, 0x22, 0x11, 0xa5, 0xa5, 0xa5, 0xa5,
		0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5,
	}
	if *b != want {
		t.Fatalf("memory after stores\n got %x\nwant %x", *b, want)
	}
}

func TestCopy64(t *testing.T) {
	var src, dst [12]uint64 // 96 bytes: the copy must stay in [16, 80)
	s := (*[96]byte)(unsafe.Pointer(&src[0]))
	for i := range s {
		s[i] = byte(i + 1)
	}
	for i := range dst {
		dst[i] = 0xeeeeeeeeeeeeeeee
	}
	Copy64(unsafe.Pointer(&dst[2]), unsafe.Pointer(&src[2]))
	d := (*[96]byte)(unsafe.Pointer(&dst[0]))
	for i := range d {
		want := byte(0xee)
		if i >= 16 && i < 80 {
			want = byte(i + 1)
		}
		if d[i] != want {
			t.Fatalf("byte %d = %#x, want %#x", i, d[i], want)
		}
	}
}

// The barriers take no arguments and must simply return; calling each one
// also checks its assembly assembles and links for this GOARCH.
func TestBarriersReturn(t *testing.T) {
	ToDevice()
	FromDevice()
	OrderingWrite()
	FlushWrites()
	WCStart()
}

func TestNoAllocs(t *testing.T) {
	var a, b [8]uint64
	n := testing.AllocsPerRun(100, func() {
		ToDevice()
		Store64(unsafe.Pointer(&a[0]), 1)
		Copy64(unsafe.Pointer(&a[0]), unsafe.Pointer(&b[0]))
		FlushWrites()
	})
	if n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

func BenchmarkDoorbell(b *testing.B) {
	var reg, wqe [8]uint64
	for i := 0; i < b.N; i++ {
		ToDevice()
		WCStart()
		Copy64(unsafe.Pointer(&reg[0]), unsafe.Pointer(&wqe[0]))
		FlushWrites()
	}
}
