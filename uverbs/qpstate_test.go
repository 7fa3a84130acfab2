package uverbs

import (
	"sync"
	"testing"
)

// The QP state Modify records is read by providers' PostRecv on other
// goroutines; under -race this fails if the two are not synchronised.
func TestQPStateConcurrentReadWrite(t *testing.T) {
	qp := &QP{}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; i < 1000; i++ {
			qp.setState(QPState(i % 6))
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 1000; i++ {
			if s := qp.State(); s > QPStateErr {
				t.Errorf("state %d", s)
				return
			}
		}
	}()
	wg.Wait()
}
