package uverbs

import (
	"strings"
	"testing"
)

func uevent(s string) []byte { return []byte(strings.ReplaceAll(s, "|", "\x00")) }

// Only the removal of a uverbs character device counts, named as the
// kernel names it (DEVNAME, relative to /dev).
func TestRemovedUverbs(t *testing.T) {
	for _, c := range []struct {
		msg  string
		dev  string
		want bool
	}{
		{"remove@/devices/virtual/infiniband_verbs/uverbs0|ACTION=remove|DEVPATH=/devices/virtual/infiniband_verbs/uverbs0|SUBSYSTEM=infiniband_verbs|DEVNAME=infiniband/uverbs0|SEQNUM=1|", "infiniband/uverbs0", true},
		{"add@/devices/virtual/infiniband_verbs/uverbs0|ACTION=add|SUBSYSTEM=infiniband_verbs|DEVNAME=infiniband/uverbs0|", "", false},
		{"remove@/devices/virtual/infiniband/rxe0|ACTION=remove|SUBSYSTEM=infiniband|", "", false},
		{"remove@/devices/virtual/infiniband_verbs/uverbs1|ACTION=remove|SUBSYSTEM=infiniband_verbs|", "", false},
		{"libudev\x00\xfe\xed\xca\xfe", "", false},
		{"", "", false},
	} {
		dev, ok := removedUverbs(uevent(c.msg))
		if ok != c.want || dev != c.dev {
			t.Errorf("%q: got %q %v, want %q %v", c.msg, dev, ok, c.dev, c.want)
		}
	}
}
