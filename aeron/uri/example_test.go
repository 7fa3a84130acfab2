package uri_test

import (
	"errors"
	"fmt"

	"github.com/ibgo/ibgo/aeron/uri"
)

// Example parses an aeron:ib channel, reads its typed values, changes one
// and formats it again; a value that breaks a rule is refused with the
// key and the rule, as Aeron's C driver refuses it.
func Example() {
	u, err := uri.Parse("aeron:ib?endpoint=10.0.0.2:24325|ib-qp=rc|mtu=8k|term-length=1m")
	if err != nil {
		panic(err)
	}
	ep, _ := u.Endpoint()
	mtu, _ := u.Size(uri.KeyMTU)
	fmt.Println(u.Media, ep.IP, ep.Port, u.IBQueuePair(), mtu)

	u.Set(uri.KeyMTU, "4096")
	fmt.Println(u)

	_, err = uri.Parse("aeron:udp?endpoint=10.0.0.2:24325|term-length=1000")
	var ue *uri.Error
	fmt.Println(errors.As(err, &ue), ue.Key)
	// Output:
	// ib 10.0.0.2 24325 rc 8192
	// aeron:ib?endpoint=10.0.0.2:24325|ib-qp=rc|mtu=4096|term-length=1m
	// true term-length
}
