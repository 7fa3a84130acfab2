package archtest

import (
	"fmt"
	"sort"
	"strings"
)

// Violation is one place where the tree breaks a rule. It is a value; copies
// are independent.
type Violation struct {
	Rule    string // the layer or the restricted import, e.g. "layer uverbs", "import unsafe"
	Package string // module-relative
	File    string // module-relative slash path; the package directory for package-level findings
	Line    int    // 0 for package-level findings
	Message string // what is wrong
	Fix     string // what to do
}

func (v Violation) String() string {
	pos := v.File
	if v.Line > 0 {
		pos = fmt.Sprintf("%s:%d", v.File, v.Line)
	}
	return fmt.Sprintf("%s: %s [%s]\n\tfix: %s", pos, v.Message, v.Rule, v.Fix)
}

// Match reports whether a module-relative package path matches a pattern:
// "..." matches everything, "x/..." matches x and every package under it,
// anything else matches itself only.
func Match(pattern, pkg string) bool {
	if pattern == "..." {
		return true
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

func matchAny(patterns []string, pkg string) bool {
	for _, p := range patterns {
		if Match(p, pkg) {
			return true
		}
	}
	return false
}

// LayerOf returns the first layer whose Packages match pkg, or nil.
func (r Rules) LayerOf(pkg string) *Layer {
	for i := range r.Layers {
		if matchAny(r.Layers[i].Packages, pkg) {
			return &r.Layers[i]
		}
	}
	return nil
}

const regenerate = "go test ./internal/archtest -update"

// Check applies the rules to the graph and returns every violation, ordered
// by file and line.
func Check(g *Graph, r Rules) []Violation {
	var vs []Violation
	for _, p := range g.Sorted() {
		pkg := g.Packages[p]
		layer := r.LayerOf(p)
		if layer == nil {
			vs = append(vs, Violation{
				Rule: "layers", Package: p, File: p + "/",
				Message: fmt.Sprintf("package %s is in no layer of the rule table", p),
				Fix: "decide where it sits in the layers (docs/architecture.md), add it to Default.Layers in internal/archtest/rules.go, then run " +
					regenerate,
			})
		}
		for _, f := range pkg.Files {
			for _, imp := range f.Imports {
				if q, ok := g.Rel(imp.Path); ok {
					if layer != nil {
						vs = append(vs, checkLayer(g, r, layer, p, f, imp, q)...)
					}
					continue
				}
				for i := range r.Restrictions {
					if r.Restrictions[i].Import == imp.Path {
						vs = append(vs, checkRestriction(&r.Restrictions[i], p, f, imp)...)
					}
				}
			}
		}
	}
	for _, l := range r.Links {
		pkg := g.Packages[l.Package]
		if pkg == nil {
			vs = append(vs, Violation{
				Rule: "links", Package: l.Package, File: l.Package + "/",
				Message: fmt.Sprintf("the rule table requires %s to link %s, but there is no package %s", l.Package, strings.Join(l.Imports, ", "), l.Package),
				Fix:     "update Default.Links in internal/archtest/rules.go to the package's new name",
			})
			continue
		}
		have := map[string]bool{}
		for _, q := range g.Imports(l.Package) {
			have[q] = true
		}
		for _, want := range l.Imports {
			if !have[want] {
				vs = append(vs, Violation{
					Rule: "links", Package: l.Package, File: l.Package + "/",
					Message: fmt.Sprintf("%s does not import %s in non-test code: %s", l.Package, want, l.Why),
					Fix:     fmt.Sprintf("add `import _ %q` to a non-test file of %s", g.Module+"/"+want, l.Package),
				})
			}
		}
	}
	sort.SliceStable(vs, func(i, j int) bool {
		if vs[i].File != vs[j].File {
			return vs[i].File < vs[j].File
		}
		return vs[i].Line < vs[j].Line
	})
	return vs
}

func checkLayer(g *Graph, r Rules, layer *Layer, p string, f *File, imp Import, q string) []Violation {
	var vs []Violation
	allowed := matchAny(layer.MayImport, q)
	if !allowed {
		vs = append(vs, Violation{
			Rule: "layer " + layer.Name, Package: p, File: f.Name, Line: imp.Line,
			Message: fmt.Sprintf("%s imports %s, which layer %q may not (it may import %s): %s",
				p, q, layer.Name, strings.Join(layer.MayImport, ", "), layer.Why),
			Fix: fmt.Sprintf("arrows point down only (docs/architecture.md, Layers): move the code that needs %s up into a package allowed to import it, "+
				"or move what %s needs down into a package it may import", q, p),
		})
	}
	if len(layer.NeverDependsOn) == 0 {
		return vs
	}
	if ql := r.LayerOf(q); ql != nil && ql.Name == layer.Name {
		return vs // q is checked itself: report the dependency where it starts
	}
	chain := pathTo(g, q, layer.NeverDependsOn)
	if chain == nil || (len(chain) == 1 && !allowed) {
		return vs // nothing forbidden reached, or already reported as a direct import
	}
	vs = append(vs, Violation{
		Rule: "layer " + layer.Name, Package: p, File: f.Name, Line: imp.Line,
		Message: fmt.Sprintf("%s depends on %s through %s: %s",
			p, chain[len(chain)-1], strings.Join(append([]string{p}, chain...), " -> "), layer.Why),
		Fix: fmt.Sprintf("%s must not link %s even indirectly: reach it through an interface that a program (cmd/ibgo) fills in instead of importing %s",
			p, strings.Join(layer.NeverDependsOn, ", "), q),
	})
	return vs
}

// pathTo returns the shortest chain of in-module imports from start to a
// package matching one of the patterns (start included), or nil.
func pathTo(g *Graph, start string, patterns []string) []string {
	prev := map[string]string{start: ""}
	queue := []string{start}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if matchAny(patterns, p) {
			var chain []string
			for q := p; q != ""; q = prev[q] {
				chain = append([]string{q}, chain...)
			}
			return chain
		}
		for _, q := range g.Imports(p) {
			if _, seen := prev[q]; !seen {
				prev[q] = p
				queue = append(queue, q)
			}
		}
	}
	return nil
}

func checkRestriction(rs *Restriction, p string, f *File, imp Import) []Violation {
	if matchAny(rs.AllowedIn, p) {
		return nil
	}
	where := "no package of this module"
	if len(rs.AllowedIn) > 0 {
		where = "only " + strings.Join(rs.AllowedIn, ", ")
	}
	v := Violation{Rule: "import " + rs.Import, Package: p, File: f.Name, Line: imp.Line, Fix: rs.Fix}
	if rs.NamesOnly == nil {
		v.Message = fmt.Sprintf("%s imports %q, which %s may import: %s", p, rs.Import, where, rs.Why)
		return []Violation{v}
	}
	if imp.Dot {
		v.Message = fmt.Sprintf("%s dot-imports %q, which hides the names it uses: %s", p, rs.Import, rs.Why)
		return []Violation{v}
	}
	var vs []Violation
	for _, ref := range imp.Refs {
		if rs.NamesOnly.MatchString(ref.Name) {
			continue
		}
		v.Line = ref.Line
		v.Message = fmt.Sprintf("%s uses %s.%s; outside %s only names matching %s may be used: %s",
			p, baseName(rs.Import), ref.Name, strings.Join(rs.AllowedIn, ", "), rs.NamesOnly, rs.Why)
		vs = append(vs, v)
	}
	return vs
}

// baseName returns the last element of an import path (the usual package name).
func baseName(importPath string) string {
	return importPath[strings.LastIndex(importPath, "/")+1:]
}
