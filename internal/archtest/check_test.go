package archtest

import (
	"path"
	"sort"
	"strings"
	"testing"
)

const mod = "github.com/ibgo/ibgo"

// in is an import of a package of the module.
func in(rel string) Import { return Import{Path: mod + "/" + rel} }

// ext is an import from outside the module, using the given names.
func ext(p string, names ...string) Import {
	imp := Import{Path: p}
	for _, n := range names {
		imp.Refs = append(imp.Refs, Ref{Name: n})
	}
	return imp
}

// build makes a graph from file -> imports; a file's package is its directory.
// Import i of a file is on line 3+i and its names on line 20+i.
func build(files map[string][]Import) *Graph {
	g := &Graph{Module: mod, Packages: map[string]*Package{}}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := path.Dir(n)
		if g.Packages[p] == nil {
			g.Packages[p] = &Package{Path: p}
		}
		f := &File{Name: n}
		for i, imp := range files[n] {
			imp.Line = 3 + i
			refs := make([]Ref, len(imp.Refs))
			for j, r := range imp.Refs {
				refs[j] = Ref{Name: r.Name, Line: 20 + i}
			}
			imp.Refs = refs
			f.Imports = append(f.Imports, imp)
		}
		g.Packages[p].Files = append(g.Packages[p].Files, f)
	}
	return g
}

// target is the tree as the redesign means it to be: no violations.
func target() map[string][]Import {
	return map[string][]Import{
		"internal/abi/abi.go":          {ext("unsafe", "Sizeof")},
		"internal/sys/sys.go":          {in("internal/abi"), ext("golang.org/x/sys/unix", "Syscall"), ext("unsafe", "Pointer"), ext("syscall", "RawConn")},
		"internal/mmio/mmio.go":        {ext("unsafe", "Pointer"), ext("golang.org/x/sys/unix", "Mmap")},
		"internal/nl/nl.go":            {in("internal/sys"), in("internal/abi")},
		"internal/shm/shm.go":          {in("internal/sys"), ext("unsafe", "Pointer")},
		"internal/testutil/t.go":       {in("internal/nl"), ext("testing", "T")},
		"uverbs/context.go":            {in("internal/sys"), in("internal/abi"), in("internal/nl"), ext("syscall", "EINVAL", "Errno")},
		"perftest/alive.go":            {in("internal/sys"), ext("syscall", "RawConn", "Conn")},
		"rxe/qp.go":                    {in("uverbs"), in("internal/sys"), in("internal/abi"), ext("unsafe", "Pointer")},
		"mlx5/qp.go":                   {in("uverbs"), in("internal/mmio"), in("internal/abi"), ext("unsafe", "Pointer")},
		"cm/cm.go":                     {in("uverbs"), in("internal/sys")},
		"perftest/run.go":              {in("uverbs"), in("cm")},
		"aeron/protocol/frame.go":      {ext("encoding/binary", "LittleEndian")},
		"aeron/cnc/cnc.go":             {in("internal/shm")},
		"aeron/driver/conductor.go":    {in("aeron/protocol"), in("aeron/cnc")},
		"aeron/media/ib/ib.go":         {in("aeron/protocol"), in("uverbs"), in("cm")},
		"cmd/ibgo/main.go":             {in("perftest"), in("aeron/driver"), in("aeron/media/ib"), in("rxe"), in("mlx5"), ext("syscall", "SIGTERM")},
		"hwtest/providers.go":          {in("rxe"), in("mlx5")},
		"hwtest/pingpong.go":           {in("uverbs"), in("perftest")},
		"hwtest/vm/main.go":            {in("hwtest/vm/harness"), ext("syscall", "SIGTERM", "Signal")},
		"hwtest/vm/harness/harness.go": {ext("os/exec", "Command")},
		"mlx5/uar.go":                  {in("internal/sys"), ext("syscall", "PROT_WRITE", "MAP_SHARED")},
		"deploy/ship/main.go":          {in("internal/release")},
		"internal/release/release.go":  {ext("archive/tar", "NewWriter")},
	}
}

func TestCheckTargetTreeIsClean(t *testing.T) {
	if vs := Check(build(target()), Default); len(vs) != 0 {
		t.Fatalf("the target tree breaks rules: %v", vs)
	}
}

// Each case breaks one rule of the target tree; Check must report exactly
// that violation.
func TestCheckCatchesEachRule(t *testing.T) {
	cases := []struct {
		name     string
		edit     func(files map[string][]Import)
		rule     string
		file     string
		line     int
		contains string
	}{
		{
			name: "uverbs imports a provider",
			edit: func(f map[string][]Import) { f["uverbs/bad.go"] = []Import{in("rxe")} },
			rule: "layer uverbs", file: "uverbs/bad.go", line: 3, contains: "uverbs imports rxe",
		},
		{
			name: "internal imports uverbs",
			edit: func(f map[string][]Import) { f["internal/nl/bad.go"] = []Import{in("uverbs")} },
			rule: "layer internal", file: "internal/nl/bad.go", line: 3, contains: "internal/nl imports uverbs",
		},
		{
			name: "a provider imports another",
			edit: func(f map[string][]Import) { f["mlx5/bad.go"] = []Import{in("internal/sys"), in("rxe")} },
			rule: "layer providers", file: "mlx5/bad.go", line: 4, contains: "mlx5 imports rxe",
		},
		{
			name: "perftest imports a provider",
			edit: func(f map[string][]Import) { f["perftest/bad.go"] = []Import{in("mlx5")} },
			rule: "layer perftest", file: "perftest/bad.go", line: 3, contains: "perftest imports mlx5",
		},
		{
			name: "cm imports perftest",
			edit: func(f map[string][]Import) { f["cm/bad.go"] = []Import{in("perftest")} },
			rule: "layer cm", file: "cm/bad.go", line: 3, contains: "cm imports perftest",
		},
		{
			name: "aeron imports uverbs",
			edit: func(f map[string][]Import) { f["aeron/cnc/bad.go"] = []Import{in("uverbs")} },
			rule: "layer aeron", file: "aeron/cnc/bad.go", line: 3, contains: "aeron/cnc imports uverbs",
		},
		{
			name: "aeron reaches verbs through aeron/media/ib",
			edit: func(f map[string][]Import) { f["aeron/driver/bad.go"] = []Import{in("aeron/media/ib")} },
			rule: "layer aeron", file: "aeron/driver/bad.go", line: 3, contains: "through aeron/driver -> aeron/media/ib -> ",
		},
		{
			name: "aeron/media/ib links a provider",
			edit: func(f map[string][]Import) { f["aeron/media/ib/bad.go"] = []Import{in("rxe")} },
			rule: "layer aeron/media/ib", file: "aeron/media/ib/bad.go", line: 3, contains: "aeron/media/ib imports rxe",
		},
		{
			name: "a library imports a program",
			edit: func(f map[string][]Import) { f["perftest/bad.go"] = []Import{in("cmd/ibgo")} },
			rule: "layer perftest", file: "perftest/bad.go", line: 3, contains: "perftest imports cmd/ibgo",
		},
		{
			name: "a program imports hwtest",
			edit: func(f map[string][]Import) { f["cmd/ibgo/bad.go"] = []Import{in("hwtest")} },
			rule: "layer cmd", file: "cmd/ibgo/bad.go", line: 3, contains: "cmd/ibgo imports hwtest",
		},
		{
			name: "unsafe in uverbs",
			edit: func(f map[string][]Import) {
				f["uverbs/bad.go"] = []Import{in("internal/abi"), ext("unsafe", "Pointer")}
			},
			rule: "import unsafe", file: "uverbs/bad.go", line: 4, contains: `uverbs imports "unsafe"`,
		},
		{
			name: "unsafe in a program",
			edit: func(f map[string][]Import) { f["cmd/ibgo/bad.go"] = []Import{ext("unsafe", "Sizeof")} },
			rule: "import unsafe", file: "cmd/ibgo/bad.go", line: 3, contains: `cmd/ibgo imports "unsafe"`,
		},
		{
			name: "unix in a provider",
			edit: func(f map[string][]Import) { f["rxe/bad.go"] = []Import{ext("golang.org/x/sys/unix", "Syscall")} },
			rule: "import golang.org/x/sys/unix", file: "rxe/bad.go", line: 3, contains: `rxe imports "golang.org/x/sys/unix"`,
		},
		{
			name: "unix in internal/shm",
			edit: func(f map[string][]Import) {
				f["internal/shm/mmap.go"] = []Import{ext("golang.org/x/sys/unix", "Mmap")}
			},
			rule: "import golang.org/x/sys/unix", file: "internal/shm/mmap.go", line: 3, contains: "internal/shm imports",
		},
		{
			name: "syscall function outside internal/sys",
			edit: func(f map[string][]Import) { f["uverbs/bad.go"] = []Import{ext("syscall", "EAGAIN", "SetNonblock")} },
			rule: "import syscall", file: "uverbs/bad.go", line: 20, contains: "uverbs uses syscall.SetNonblock",
		},
		{
			name: "syscall call in the harness",
			edit: func(f map[string][]Import) { f["hwtest/vm/bad.go"] = []Import{ext("syscall", "SIGINT", "Kill")} },
			rule: "import syscall", file: "hwtest/vm/bad.go", line: 20, contains: "hwtest/vm uses syscall.Kill",
		},
		{
			name: "syscall sockaddr type in perftest",
			edit: func(f map[string][]Import) {
				f["perftest/alive.go"] = []Import{ext("syscall", "SIGPIPE", "SockaddrInet4")}
			},
			rule: "import syscall", file: "perftest/alive.go", line: 20, contains: "perftest uses syscall.SockaddrInet4",
		},
		{
			name: "deploy tooling imports uverbs",
			edit: func(f map[string][]Import) { f["deploy/ship/bad.go"] = []Import{in("uverbs")} },
			rule: "layer deploy", file: "deploy/ship/bad.go", line: 3, contains: "deploy/ship imports uverbs",
		},
		{
			name: "syscall dot import",
			edit: func(f map[string][]Import) { f["hwtest/bad.go"] = []Import{{Path: "syscall", Dot: true}} },
			rule: "import syscall", file: "hwtest/bad.go", line: 3, contains: "dot-imports",
		},
		{
			name: "cgo anywhere",
			edit: func(f map[string][]Import) { f["internal/sys/bad.go"] = []Import{ext("C")} },
			rule: "import C", file: "internal/sys/bad.go", line: 3, contains: "no package of this module",
		},
		{
			name: "a package in no layer",
			edit: func(f map[string][]Import) { f["tools/gen/gen.go"] = nil },
			rule: "layers", file: "tools/gen/", contains: "tools/gen is in no layer",
		},
		{
			name: "the module root package is in no layer",
			edit: func(f map[string][]Import) { f["./ibgo.go"] = nil },
			rule: "layers", file: "./", contains: "package . is in no layer",
		},
		{
			name: "hwtest does not link mlx5",
			edit: func(f map[string][]Import) { f["hwtest/providers.go"] = []Import{in("rxe")} },
			rule: "links", file: "hwtest/", contains: "hwtest does not import mlx5",
		},
		{
			name: "the package a link rule names is gone",
			edit: func(f map[string][]Import) {
				delete(f, "cmd/ibgo/main.go")
			},
			rule: "links", file: "cmd/ibgo/", contains: "there is no package cmd/ibgo",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files := target()
			c.edit(files)
			vs := Check(build(files), Default)
			if len(vs) != 1 {
				t.Fatalf("want exactly one violation, got %d:\n%v", len(vs), vs)
			}
			v := vs[0]
			if v.Rule != c.rule || v.File != c.file || v.Line != c.line || !strings.Contains(v.Message, c.contains) || v.Fix == "" {
				t.Fatalf("got %+v\nwant rule %q at %s:%d, message containing %q and a fix", v, c.rule, c.file, c.line, c.contains)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, pkg string
		want         bool
	}{
		{"uverbs", "uverbs", true},
		{"uverbs", "uverbs/x", false},
		{"uverbs", "uverbsx", false},
		{"aeron/...", "aeron", true},
		{"aeron/...", "aeron/media/ib", true},
		{"aeron/...", "aeronx", false},
		{"aeron/media/ib/...", "aeron/media", false},
		{"...", "anything/at/all", true},
	} {
		if got := Match(c.pattern, c.pkg); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pattern, c.pkg, got, c.want)
		}
	}
}

func TestRenderGraph(t *testing.T) {
	got := RenderGraph(build(target()), Default)
	for _, want := range []string{
		"| `uverbs` | uverbs | `internal/abi`, `internal/nl`, `internal/sys` | `syscall` (EINVAL, Errno) |\n",
		"| `aeron/media/ib` | aeron/media/ib | `aeron/protocol`, `cm`, `uverbs` | — |\n",
		"| `internal/sys` | internal | `internal/abi` | `unsafe`, `golang.org/x/sys/unix`, `syscall` |\n",
		"| `perftest` | perftest | `cm`, `internal/sys`, `uverbs` | `syscall` (Conn, RawConn) |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("RenderGraph lacks the row\n%s\nin\n%s", want, got)
		}
	}
	files := target()
	files["tools/gen/gen.go"] = nil
	if got := RenderGraph(build(files), Default); !strings.Contains(got, "| `tools/gen` | **none** | — | — |") {
		t.Errorf("a package in no layer is not marked:\n%s", got)
	}
}

func TestReplaceBlock(t *testing.T) {
	doc := "intro\n" + beginMarker("x") + "\nold\n" + endMarker("x") + "\nafter\n"
	got, err := ReplaceBlock(doc, "x", "new\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "intro\n" + beginMarker("x") + "\nnew\n" + endMarker("x") + "\nafter\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	for _, bad := range []string{
		"no markers",
		endMarker("x") + "\n" + beginMarker("x") + "\n",
		beginMarker("x") + "\n" + beginMarker("x") + "\n" + endMarker("x") + "\n",
	} {
		if _, err := ReplaceBlock(bad, "x", "new\n"); err == nil {
			t.Errorf("ReplaceBlock(%q) succeeded", bad)
		}
	}
}
