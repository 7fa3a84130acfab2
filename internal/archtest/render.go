package archtest

import (
	"fmt"
	"sort"
	"strings"
)

// The generated blocks of docs/architecture.md sit between these markers.
func beginMarker(name string) string {
	return fmt.Sprintf("<!-- BEGIN GENERATED %s: `%s` rewrites this block; do not edit -->", name, regenerate)
}

func endMarker(name string) string { return fmt.Sprintf("<!-- END GENERATED %s -->", name) }

// ReplaceBlock returns doc with the named generated block's content replaced.
// The block's markers must already be in doc, once each, in order.
func ReplaceBlock(doc, name, content string) (string, error) {
	begin, end := beginMarker(name), endMarker(name)
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i < 0 || j < 0 || j < i || strings.Count(doc, begin) != 1 || strings.Count(doc, end) != 1 {
		return "", fmt.Errorf("the generated block %q needs one line %q and, below it, one line %q", name, begin, end)
	}
	return doc[:i+len(begin)] + "\n" + content + doc[j:], nil
}

// row writes one Markdown table row; a | inside a cell (a regexp) is escaped
// so that it does not end the cell.
func row(b *strings.Builder, cells ...string) {
	for _, c := range cells {
		b.WriteString("| ")
		b.WriteString(strings.ReplaceAll(c, "|", `\|`))
		b.WriteString(" ")
	}
	b.WriteString("|\n")
}

func code(ps []string) string {
	if len(ps) == 0 {
		return "—"
	}
	q := make([]string, len(ps))
	for i, p := range ps {
		q[i] = "`" + p + "`"
	}
	return strings.Join(q, ", ")
}

// RenderRules renders the rule tables as Markdown.
func RenderRules(r Rules) string {
	var b strings.Builder
	b.WriteString("Layers (a package belongs to the first row that matches it; `x/...` is x and everything under it):\n\n")
	b.WriteString("| layer | packages | may import (in this module) | never depends on, even indirectly | why |\n|---|---|---|---|---|\n")
	for _, l := range r.Layers {
		row(&b, l.Name, code(l.Packages), code(l.MayImport), code(l.NeverDependsOn), l.Why)
	}
	b.WriteString("\nThe kernel boundary (non-test code; tests may use anything):\n\n")
	b.WriteString("| import | allowed in | elsewhere | why |\n|---|---|---|---|\n")
	for _, rs := range r.Restrictions {
		elsewhere := "forbidden"
		if rs.NamesOnly != nil {
			elsewhere = "only names matching `" + rs.NamesOnly.String() + "`"
		}
		row(&b, "`"+rs.Import+"`", code(rs.AllowedIn), elsewhere, rs.Why)
	}
	b.WriteString("\nPackages that must link others (a direct non-test import):\n\n")
	b.WriteString("| package | must import | why |\n|---|---|---|\n")
	for _, l := range r.Links {
		row(&b, "`"+l.Package+"`", code(l.Imports), l.Why)
	}
	return b.String()
}

// RenderGraph renders the module's import graph as Markdown: each package,
// its layer, the in-module packages it imports and the restricted imports its
// non-test files use (with, for syscall outside internal/sys, the names).
func RenderGraph(g *Graph, r Rules) string {
	var b strings.Builder
	b.WriteString("| package | layer | imports (in this module) | boundary imports |\n|---|---|---|---|\n")
	for _, p := range g.Sorted() {
		layer := "**none**"
		if l := r.LayerOf(p); l != nil {
			layer = l.Name
		}
		row(&b, "`"+p+"`", layer, code(g.Imports(p)), restricted(g.Packages[p], r))
	}
	return b.String()
}

// restricted lists the restricted imports a package's files use; for a
// names-only import outside the packages allowed everything, the names used.
func restricted(pkg *Package, r Rules) string {
	names := map[string]map[string]bool{}
	for _, f := range pkg.Files {
		for _, imp := range f.Imports {
			for _, rs := range r.Restrictions {
				if rs.Import != imp.Path {
					continue
				}
				if names[imp.Path] == nil {
					names[imp.Path] = map[string]bool{}
				}
				if rs.NamesOnly != nil && !matchAny(rs.AllowedIn, pkg.Path) {
					for _, ref := range imp.Refs {
						names[imp.Path][ref.Name] = true
					}
				}
			}
		}
	}
	var out []string
	for _, rs := range r.Restrictions {
		used, ok := names[rs.Import]
		if !ok {
			continue
		}
		s := "`" + rs.Import + "`"
		if len(used) > 0 {
			var l []string
			for n := range used {
				l = append(l, n)
			}
			sort.Strings(l)
			s += " (" + strings.Join(l, ", ") + ")"
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return "—"
	}
	return strings.Join(out, ", ")
}
