package uverbs

import "testing"

// SGEOf names a slice of the registered buffer by offset and refuses one
// that reaches outside it or belongs to other memory.
func TestMRSGEOf(t *testing.T) {
	backing := make([]byte, 4096)
	mr := &MR{buf: backing[1024:3072], iova: 0x10000, lkey: 7}
	s, ok := mr.SGEOf(backing[1024+100 : 1024+164])
	if !ok || s != (SGE{Addr: 0x10000 + 100, Length: 64, LKey: 7}) {
		t.Fatalf("inside: %+v %v", s, ok)
	}
	if s, ok := mr.SGEOf(mr.buf); !ok || s.Addr != 0x10000 || s.Length != 2048 {
		t.Fatalf("whole: %+v %v", s, ok)
	}
	for name, b := range map[string][]byte{
		"before": backing[1000:1100], "after": backing[3000:3100], "outside": backing[0:10],
		"other": make([]byte, 10), "empty": backing[1500:1500],
	} {
		if _, ok := mr.SGEOf(b); ok {
			t.Errorf("%s: SGEOf accepted memory outside the region", name)
		}
	}
	allocs := testing.AllocsPerRun(100, func() { _, _ = mr.SGEOf(backing[2000:2100]) })
	if allocs != 0 {
		t.Errorf("SGEOf allocates %v", allocs)
	}
}
