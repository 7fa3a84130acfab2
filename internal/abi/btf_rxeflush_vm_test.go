//go:build linux

package abi

import (
	"os"
	"reflect"
	"testing"

	"github.com/cilium/ebpf/btf"
	"github.com/stretchr/testify/require"
)

// RxeSendWRFlush is not in the layouts registry (the 6.1 C headers the host
// test compiles against have no wr.flush), so it is checked here against the
// running kernel's rdma_rxe BTF: on a kernel with FLUSH (6.2+) every field
// must sit where the Go view puts it; on one without, the union has no flush
// member, which is why uverbs refuses FLUSH there.
func TestRxeSendWRFlushMatchesKernelBTF(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/btf/rdma_rxe"); err != nil {
		if os.Getenv("REQUIRE_VM") == "1" {
			t.Fatalf("REQUIRE_VM=1 but /sys/kernel/btf/rdma_rxe is missing: %v", err)
		}
		t.Skip("VM tier: no rdma_rxe module BTF here (run it with `make test-vm`)")
	}
	base, err := btf.LoadKernelSpec()
	require.NoError(t, err)
	rxe, err := btf.LoadKernelModuleSpec("rdma_rxe")
	require.NoError(t, err)
	ks, where := kernelStruct(t, map[string]*btf.Spec{"vmlinux": base, "rdma_rxe": rxe}, "rxe_send_wr")
	require.NotNil(t, ks, "struct rxe_send_wr in the kernel's BTF")
	if _, _, err := member(ks, "wr.flush"); err != nil {
		t.Skipf("this kernel's struct rxe_send_wr has no wr.flush (%v): rxe has no FLUSH before Linux 6.2", err)
	}
	typ := reflect.TypeOf(RxeSendWRFlush{})
	require.EqualValues(t, ks.Size, typ.Size())
	n := 0
	for _, f := range goFields(typ) {
		off, size, err := member(ks, f.c)
		require.NoError(t, err, "struct rxe_send_wr in %s BTF", where)
		require.Equal(t, [2]uint64{uint64(f.offset), uint64(f.size)}, [2]uint64{uint64(off), uint64(size)},
			"rxe_send_wr field %s: Go [offset size] vs kernel BTF (%s)", f.c, where)
		n++
	}
	t.Logf("rxe_send_wr's wr.flush view: %d fields match %s BTF", n, where)
}
