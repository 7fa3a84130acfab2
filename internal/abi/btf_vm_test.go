//go:build linux

package abi

import (
	"errors"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
	"github.com/stretchr/testify/require"
)

// btfModules are the kernel modules whose BTF holds the uapi structs (each
// struct is in the module whose code uses it).
var btfModules = []string{"ib_uverbs", "ib_core", "rdma_ucm", "rdma_rxe", "mlx5_ib"}

// notInBTF lists mirrors the kernel never names in code (so no BTF type is
// emitted for them); they are still checked against the C headers.
var notInBTF = map[string]bool{
	// The kernel copies SGEs as struct ib_sge; the uapi name appears only
	// in a sizeof, which emits no type (seen on 6.1).
	"ib_uverbs_sge": true,
}

// kernelStruct finds the named struct in vmlinux or module BTF.
func kernelStruct(t *testing.T, specs map[string]*btf.Spec, name string) (*btf.Struct, string) {
	var names []string
	for n := range specs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		var s *btf.Struct
		if err := specs[n].TypeByName(name, &s); err == nil {
			return s, n
		}
	}
	return nil, ""
}

// member walks a possibly nested designator ("per_transport_caps.rc_odp_caps").
func member(s *btf.Struct, designator string) (off uint32, size int, err error) {
	parts := strings.Split(designator, ".")
	var cur btf.Type = s
	for i, p := range parts {
		var members []btf.Member
		switch c := btf.UnderlyingType(cur).(type) {
		case *btf.Struct:
			members = c.Members
		case *btf.Union:
			members = c.Members
		default:
			return 0, 0, errors.New(designator + ": not a struct")
		}
		m, moff, ok := findMember(members, p)
		if !ok {
			return 0, 0, errors.New("no member " + strings.Join(parts[:i+1], "."))
		}
		off += moff
		cur = m.Type
	}
	n, err := btf.Sizeof(cur)
	return off, n, err
}

// findMember looks for name among members, descending into anonymous
// structs and unions as C does (ib_uverbs_attr's data is in one).
func findMember(members []btf.Member, name string) (btf.Member, uint32, bool) {
	for _, m := range members {
		if m.Name == name {
			return m, m.Offset.Bytes(), true
		}
	}
	for _, m := range members {
		if m.Name != "" {
			continue
		}
		var inner []btf.Member
		switch c := btf.UnderlyingType(m.Type).(type) {
		case *btf.Struct:
			inner = c.Members
		case *btf.Union:
			inner = c.Members
		}
		if im, off, ok := findMember(inner, name); ok {
			return im, m.Offset.Bytes() + off, true
		}
	}
	return btf.Member{}, 0, false
}

// TestLayoutsMatchKernelBTF checks every mirror against the running kernel's
// BTF: the kernel's struct may be longer than ours (newer kernels append
// fields), but every field we use must sit at the same offset with the same
// size.
func TestLayoutsMatchKernelBTF(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/btf/ib_uverbs"); err != nil {
		if os.Getenv("REQUIRE_VM") == "1" {
			t.Fatalf("REQUIRE_VM=1 but /sys/kernel/btf/ib_uverbs is missing: %v", err)
		}
		t.Skip("VM tier: no ib_uverbs module BTF here (run it with `make test-vm`)")
	}
	specs := map[string]*btf.Spec{}
	base, err := btf.LoadKernelSpec()
	require.NoError(t, err)
	specs["vmlinux"] = base
	for _, m := range btfModules {
		s, err := btf.LoadKernelModuleSpec(m)
		if err != nil {
			continue // module not loaded here (mlx5_ib in the VM)
		}
		specs[m] = s
	}
	require.Contains(t, specs, "ib_uverbs")
	checked, fields := 0, 0
	var missing []string
	for _, l := range layouts {
		if strings.HasPrefix(l.header, "rdma/mlx5") && specs["mlx5_ib"] == nil {
			t.Logf("%s: mlx5_ib is not loaded here; checked against the C headers only", l.c)
			continue
		}
		ks, where := kernelStruct(t, specs, l.c)
		if ks == nil {
			if !notInBTF[l.c] {
				missing = append(missing, l.c)
			}
			continue
		}
		typ := reflect.TypeOf(l.goType)
		require.GreaterOrEqual(t, ks.Size, uint32(typ.Size()), "struct %s (%s BTF) is shorter than our %s", l.c, where, typ.Name())
		for _, f := range goFields(typ) {
			off, size, err := member(ks, f.c)
			require.NoError(t, err, "struct %s in %s BTF", l.c, where)
			require.Equal(t, [2]uint64{uint64(f.offset), uint64(f.size)}, [2]uint64{uint64(off), uint64(size)},
				"struct %s field %s: Go [offset size] vs kernel BTF (%s)", l.c, f.c, where)
			fields++
		}
		checked++
	}
	t.Logf("%d structs (%d fields) match the kernel's BTF; not in any BTF: %v", checked, fields, missing)
	require.Empty(t, missing, "structs not found in the kernel's BTF: add them to notInBTF only if the kernel never uses them")
}
