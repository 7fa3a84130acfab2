package shm

import "testing"

func TestSameStartWithin(t *testing.T) {
	b := make([]byte, 64)
	if !SameStart(b[8:16], b[8:]) || SameStart(b[8:16], b[9:]) || SameStart(nil, b) {
		t.Fatal("SameStart")
	}
	c := make([]byte, 64)
	if !Within(b, b[4:60]) || Within(b, c[:4]) || Within(b[:32], b[30:40]) || Within(b, nil) {
		t.Fatal("Within")
	}
}
