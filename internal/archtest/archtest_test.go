package archtest

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated blocks of docs/architecture.md from the tree")

// moduleRoot is two directories up from this package (internal/archtest).
const moduleRoot = "../.."

var (
	loadOnce  sync.Once
	loaded    *Graph
	loadError error
)

func module(t *testing.T) *Graph {
	t.Helper()
	loadOnce.Do(func() { loaded, loadError = Load(moduleRoot) })
	if loadError != nil {
		t.Fatalf("loading the module's import graph: %v", loadError)
	}
	return loaded
}

// TestBoundary applies the rules of rules.go (the layers and kernel boundary of docs/architecture.md) to the
// module. Each package is a subtest, so `-run TestBoundary/uverbs` checks one.
func TestBoundary(t *testing.T) {
	g := module(t)
	if g.Module != "github.com/ibgo/ibgo" {
		t.Fatalf("loaded module %q, want github.com/ibgo/ibgo", g.Module)
	}
	byPkg := map[string][]Violation{}
	vs := Check(g, Default)
	for _, v := range vs {
		byPkg[v.Package] = append(byPkg[v.Package], v)
	}
	for _, p := range g.Sorted() {
		t.Run(p, func(t *testing.T) {
			for _, v := range byPkg[p] {
				t.Error(v)
			}
		})
	}
	// Link rules may name packages that do not exist.
	for p, pvs := range byPkg {
		if g.Packages[p] == nil {
			for _, v := range pvs {
				t.Error(v)
			}
		}
	}
	if len(vs) > 0 {
		t.Logf("%d violations of the architecture rules (internal/archtest/rules.go, docs/architecture.md); summary:\n%s", len(vs), summary(vs))
	}
}

func summary(vs []Violation) string {
	count := map[string]int{}
	var keys []string
	for _, v := range vs {
		k := fmt.Sprintf("%-18s %s", v.Package, v.Rule)
		if count[k] == 0 {
			keys = append(keys, k)
		}
		count[k]++
	}
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\t%s: %d\n", k, count[k])
	}
	return b.String()
}

// TestArchitectureDoc fails when the generated blocks of docs/architecture.md
// (the rule tables and the import graph) disagree with rules.go and the tree.
func TestArchitectureDoc(t *testing.T) {
	g := module(t)
	docPath := filepath.Join(moduleRoot, "docs", "architecture.md")
	raw, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	blocks := []struct{ name, content string }{
		{"rules", RenderRules(Default)},
		{"graph", RenderGraph(g, Default)},
	}
	want := doc
	for _, b := range blocks {
		want, err = ReplaceBlock(want, b.name, b.content)
		if err != nil {
			t.Fatalf("docs/architecture.md: %v", err)
		}
	}
	if want == doc {
		return
	}
	if *update {
		if err := os.WriteFile(docPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the generated blocks of %s", docPath)
		return
	}
	t.Errorf("docs/architecture.md disagrees with the tree; run `%s` and review the diff.\n%s", regenerate, lineDiff(doc, want))
}

// lineDiff lists the lines only in have (-) and only in want (+), in order.
func lineDiff(have, want string) string {
	in := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[l]++
		}
		return m
	}
	h, w := in(have), in(want)
	var b strings.Builder
	for _, l := range strings.Split(have, "\n") {
		if w[l] == 0 {
			fmt.Fprintf(&b, "-%s\n", l)
		}
	}
	for _, l := range strings.Split(want, "\n") {
		if h[l] == 0 {
			fmt.Fprintf(&b, "+%s\n", l)
		}
	}
	return b.String()
}
