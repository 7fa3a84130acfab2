package abi

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// field is one member of a Go mirror struct: its C designator and layout.
type field struct {
	c      string
	offset uintptr
	size   uintptr
}

// goFields lists the c-tagged fields of a mirror struct.
func goFields(t reflect.Type) []field {
	var fs []field
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("c")
		if tag == "" {
			continue
		}
		fs = append(fs, field{tag, f.Offset, f.Type.Size()})
	}
	return fs
}

// cheaders finds the uapi header directory (linux-libc-dev) and gcc, or says
// why the golden test cannot run here.
func cheaders(t *testing.T) (gcc string) {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found: install gcc and linux-libc-dev to check the ABI structs against the C headers")
	}
	if _, err := os.Stat("/usr/include/rdma/ib_user_verbs.h"); err != nil {
		t.Skip("/usr/include/rdma/ib_user_verbs.h missing: install linux-libc-dev to check the ABI structs against the C headers")
	}
	return gcc
}

// runC compiles and runs a generated C program and returns its stdout.
func runC(t *testing.T, gcc, src string) string {
	t.Helper()
	dir := t.TempDir()
	c := filepath.Join(dir, "probe.c")
	bin := filepath.Join(dir, "probe")
	require.NoError(t, os.WriteFile(c, []byte(src), 0o644))
	out, err := exec.Command(gcc, "-std=gnu11", "-Wall", "-o", bin, c).CombinedOutput()
	require.NoError(t, err, "gcc failed:\n%s\n--- source ---\n%s", out, src)
	out, err = exec.Command(bin).Output()
	require.NoError(t, err)
	return string(out)
}

func includes() string {
	hs := map[string]bool{"rdma/ib_user_verbs.h": true, "rdma/ib_user_ioctl_cmds.h": true, "rdma/ib_user_ioctl_verbs.h": true, "rdma/rdma_user_ioctl_cmds.h": true}
	for _, l := range layouts {
		hs[l.header] = true
	}
	var names []string
	for h := range hs {
		names = append(names, h)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("#include <stdio.h>\n#include <stddef.h>\n#include <linux/types.h>\n")
	for _, h := range names {
		fmt.Fprintf(&b, "#include <%s>\n", h)
	}
	return b.String()
}

func TestLayoutsMatchCHeaders(t *testing.T) {
	gcc := cheaders(t)
	var b strings.Builder
	b.WriteString(includes())
	b.WriteString("int main(void) {\n")
	for _, l := range layouts {
		fmt.Fprintf(&b, "\tprintf(\"%s - %%zu 0\\n\", sizeof(struct %s));\n", l.c, l.c)
		for _, f := range goFields(reflect.TypeOf(l.goType)) {
			fmt.Fprintf(&b, "\tprintf(\"%s %s %%zu %%zu\\n\", offsetof(struct %s, %s), sizeof(((struct %s *)0)->%s));\n",
				l.c, f.c, l.c, f.c, l.c, f.c)
		}
	}
	b.WriteString("\treturn 0;\n}\n")
	got := map[string][2]uint64{}
	sc := bufio.NewScanner(strings.NewReader(runC(t, gcc, b.String())))
	for sc.Scan() {
		var s, f string
		var off, size uint64
		_, err := fmt.Sscanf(sc.Text(), "%s %s %d %d", &s, &f, &off, &size)
		require.NoError(t, err, sc.Text())
		got[s+" "+f] = [2]uint64{off, size}
	}
	for _, l := range layouts {
		typ := reflect.TypeOf(l.goType)
		c := got[l.c+" -"]
		require.Equal(t, c[0], uint64(typ.Size()), "sizeof(struct %s) in C vs %s in Go", l.c, typ.Name())
		fs := goFields(typ)
		require.NotEmpty(t, fs, "%s has no c-tagged fields", typ.Name())
		for _, f := range fs {
			c := got[l.c+" "+f.c]
			require.Equal(t, [2]uint64{uint64(f.offset), uint64(f.size)}, c,
				"struct %s field %s: Go [offset size] vs C", l.c, f.c)
		}
	}
}

// packageConstants type-checks this package's non-test files and returns every
// constant spelled like a C identifier (upper case with underscores).
func packageConstants(t *testing.T) map[string]int64 {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	require.NoError(t, err)
	var files []*ast.File
	for _, p := range pkgs {
		for _, f := range p.Files {
			files = append(files, f)
		}
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	pkg, err := conf.Check("abi", fset, files, nil)
	require.NoError(t, err)
	out := map[string]int64{}
	for _, name := range pkg.Scope().Names() {
		c, ok := pkg.Scope().Lookup(name).(*types.Const)
		if !ok || strings.ToUpper(name) != name || !strings.Contains(name, "_") {
			continue
		}
		v, exact := constant.Int64Val(constant.ToInt(c.Val()))
		require.True(t, exact, name)
		out[name] = v
	}
	return out
}

// notInHeaders are constants of ours that the installed headers do not define
// (newer kernels, or values the headers only give as expressions).
var notInHeaders = map[string]bool{}

func TestConstantsMatchCHeaders(t *testing.T) {
	gcc := cheaders(t)
	consts := packageConstants(t)
	require.Greater(t, len(consts), 100)
	var names []string
	for n := range consts {
		if !notInHeaders[n] {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(includes())
	b.WriteString("#include <rdma/rdma_netlink.h>\n#include <linux/netlink.h>\nint main(void) {\n")
	for _, n := range names {
		fmt.Fprintf(&b, "\tprintf(\"%s %%lld\\n\", (long long)(%s));\n", n, n)
	}
	b.WriteString("\treturn 0;\n}\n")
	out := runC(t, gcc, b.String())
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, val, ok := strings.Cut(line, " ")
		require.True(t, ok, line)
		v, err := strconv.ParseInt(val, 10, 64)
		require.NoError(t, err, line)
		require.Equal(t, v, consts[name], "constant %s: C vs Go", name)
		seen++
	}
	require.Equal(t, len(names), seen)
}

// TestNoStrayBytes guards the compile-time size table: every mirror listed in
// layouts is a struct with a HostLayout marker.
func TestMirrorsAreHostLayout(t *testing.T) {
	for _, l := range layouts {
		typ := reflect.TypeOf(l.goType)
		require.Equal(t, reflect.Struct, typ.Kind(), l.c)
		require.Equal(t, "_", typ.Field(0).Name, "%s: first field must be _ structs.HostLayout", typ.Name())
		require.True(t, bytes.Contains([]byte(typ.Field(0).Type.String()), []byte("HostLayout")), typ.Name())
	}
}
