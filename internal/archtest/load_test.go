package archtest

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// Load sees every non-test file whatever its build constraints, skips test
// files and `//go:build ignore` generators, and records the names used
// through each import.
func TestLoadFixture(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/fix\n\ngo 1.22\n")
	write("a/a.go", "package a\n\nimport _ \"example.com/fix/b\"\n")
	write("a/a_darwin.go", "//go:build darwin\n\npackage a\n\nimport \"unsafe\"\n\nvar _ = unsafe.Sizeof(0)\n")
	write("a/a_test.go", "package a\n\nimport \"syscall\"\n\nvar _ = syscall.Getpid\n")
	write("a/gen.go", "//go:build ignore\n\npackage main\n\nimport \"os/exec\"\n\nvar _ = exec.Command\n")
	write("b/b.go", "package b\n\nimport (\n\t\"syscall\"\n\tsc \"syscall\"\n)\n\nvar _ = syscall.SIGTERM\n\nfunc f() { sc.Getpid() }\n")
	write("c/c_plan9.go", "//go:build plan9\n\npackage c\n\nimport \"unsafe\"\n\nvar _ = unsafe.Sizeof(0)\n")
	t.Setenv("GOWORK", "off")
	t.Setenv("GOFLAGS", "")

	g, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if g.Module != "example.com/fix" {
		t.Fatalf("module %q", g.Module)
	}
	if got := g.Sorted(); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Fatalf("packages %v, want a b c (c builds only on plan9 and still counts)", got)
	}
	var files []string
	for _, f := range g.Packages["a"].Files {
		files = append(files, f.Name)
	}
	if !reflect.DeepEqual(files, []string{"a/a.go", "a/a_darwin.go"}) {
		t.Fatalf("a's files %v, want a/a.go a/a_darwin.go (no test file, no ignore-tagged generator)", files)
	}
	if got := g.Imports("a"); !reflect.DeepEqual(got, []string{"b"}) {
		t.Fatalf("a imports %v, want [b]", got)
	}
	want := []Import{
		{Path: "syscall", Line: 4, Refs: []Ref{{Name: "SIGTERM", Line: 8}}},
		{Path: "syscall", Line: 5, Refs: []Ref{{Name: "Getpid", Line: 10}}},
	}
	if got := g.Packages["b"].Files[0].Imports; !reflect.DeepEqual(got, want) {
		t.Fatalf("b's imports\n%+v\nwant\n%+v", got, want)
	}
	if got := g.Packages["c"].Files[0].Imports[0].Path; got != "unsafe" {
		t.Fatalf("c's import %q, want unsafe", got)
	}
}
