package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Graph is the non-test import graph of one module. Load builds it and
// nothing changes it afterwards, so any number of goroutines may read it
// (Check, Render*) concurrently; so are Package, File, Import and Ref, its parts.
type Graph struct {
	Module   string              // module path, e.g. github.com/ibgo/ibgo
	Packages map[string]*Package // by module-relative path ("." for the module root)
}

// Package is one package of the module: its non-test files, whatever their
// build constraints.
type Package struct {
	Path  string // module-relative import path, e.g. internal/sys
	Files []*File
}

// File is one non-test source file and what it imports.
type File struct {
	Name    string // slash path relative to the module root, e.g. uverbs/cq.go
	Imports []Import
}

// Import is one import spec of a file.
type Import struct {
	Path string // as written, e.g. golang.org/x/sys/unix
	Line int
	Dot  bool  // import . "path": the names used cannot be told apart
	Refs []Ref // the names the file uses through this import (pkg.Name)
}

// Ref is one use of an imported name.
type Ref struct {
	Name string
	Line int
}

// Rel returns the module-relative path of an import path inside the module.
func (g *Graph) Rel(importPath string) (string, bool) {
	if importPath == g.Module {
		return ".", true
	}
	if rel, ok := strings.CutPrefix(importPath, g.Module+"/"); ok {
		return rel, true
	}
	return "", false
}

// Sorted returns the module-relative package paths in order.
func (g *Graph) Sorted() []string {
	paths := make([]string, 0, len(g.Packages))
	for p := range g.Packages {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths
}

// Imports returns the sorted module-relative packages p imports from its
// non-test files.
func (g *Graph) Imports(p string) []string {
	pkg := g.Packages[p]
	if pkg == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, f := range pkg.Files {
		for _, imp := range f.Imports {
			if q, ok := g.Rel(imp.Path); ok && !seen[q] {
				seen[q] = true
				out = append(out, q)
			}
		}
	}
	sort.Strings(out)
	return out
}

// listedPackage is the part of `go list -json` output Load reads.
type listedPackage struct {
	ImportPath     string
	Dir            string
	Module         *struct{ Path, Dir string }
	GoFiles        []string
	CgoFiles       []string
	IgnoredGoFiles []string
	Imports        []string
	Error          *struct{ Err string }
}

// Load builds the graph of the module containing dir. Every directory of the
// module that holds .go files (as `./...` would walk it: not testdata, not
// names starting with . or _, not nested modules) is a package, even one whose
// files all build only on another platform; `go list -e -json` names each
// package's files, and each non-test file is parsed for its imports, whatever
// its build constraints. A file constrained by exactly `//go:build ignore` (a
// generator, never part of the package) is left out.
func Load(dir string) (*Graph, error) {
	gomod, err := goCmd(dir, "env", "GOMOD")
	if err != nil {
		return nil, err
	}
	gomod = strings.TrimSpace(gomod)
	if gomod == "" || gomod == os.DevNull {
		return nil, fmt.Errorf("%s is not inside a Go module", dir)
	}
	root := filepath.Dir(gomod)
	dirs, err := packageDirs(root)
	if err != nil {
		return nil, err
	}
	out, err := goCmd(root, append([]string{"list", "-e", "-json"}, dirs...)...)
	if err != nil {
		return nil, err
	}
	var g *Graph
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var lp listedPackage
		if err := dec.Decode(&lp); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		if lp.Module == nil {
			return nil, fmt.Errorf("go list: package %s is in no module", lp.ImportPath)
		}
		if g == nil {
			g = &Graph{Module: lp.Module.Path, Packages: map[string]*Package{}}
		}
		if lp.Module.Path != g.Module {
			continue
		}
		if lp.Error != nil && !strings.Contains(lp.Error.Err, "build constraints exclude all Go files") {
			return nil, fmt.Errorf("go list: %s: %s", lp.ImportPath, lp.Error.Err)
		}
		rel, _ := g.Rel(lp.ImportPath)
		pkg, err := loadPackage(root, rel, lp)
		if err != nil {
			return nil, err
		}
		g.Packages[rel] = pkg
	}
	if g == nil {
		return nil, fmt.Errorf("module %s has no packages", root)
	}
	return g, nil
}

func goCmd(dir string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s in %s: %v: %s", strings.Join(args, " "), dir, err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// packageDirs lists, as ./rel patterns, the directories under root that hold
// .go files, skipping what the go command's ./... skips.
func packageDirs(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if p != root {
			name := d.Name()
			if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // a nested module is not ours
			}
		}
		matches, err := filepath.Glob(filepath.Join(p, "*.go"))
		if err != nil {
			return err
		}
		if len(matches) > 0 {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			dirs = append(dirs, "./"+filepath.ToSlash(rel))
		}
		return nil
	})
	return dirs, err
}

func loadPackage(root, rel string, lp listedPackage) (*Package, error) {
	pkg := &Package{Path: rel}
	var names []string
	names = append(names, lp.GoFiles...)
	names = append(names, lp.CgoFiles...)
	names = append(names, lp.IgnoredGoFiles...)
	sort.Strings(names)
	fset := token.NewFileSet()
	parsed := map[string]bool{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		full := filepath.Join(lp.Dir, name)
		src, err := os.ReadFile(full)
		if err != nil {
			return nil, err
		}
		af, err := parser.ParseFile(fset, full, src, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", full, err)
		}
		if ignored(af) {
			continue
		}
		relName, err := filepath.Rel(root, full)
		if err != nil {
			return nil, err
		}
		f := &File{Name: filepath.ToSlash(relName), Imports: fileImports(fset, af)}
		for _, imp := range f.Imports {
			parsed[imp.Path] = true
		}
		pkg.Files = append(pkg.Files, f)
	}
	// The files parsed for this platform must account for every import go
	// list resolved; cgo adds implicit imports, so cgo packages are exempt
	// (and the rules forbid cgo anyway).
	if len(lp.CgoFiles) == 0 {
		for _, imp := range lp.Imports {
			if !parsed[imp] {
				return nil, fmt.Errorf("%s: go list reports import %q that no parsed file has", lp.ImportPath, imp)
			}
		}
	}
	return pkg, nil
}

// ignored reports whether the file's build constraint is exactly "ignore".
func ignored(af *ast.File) bool {
	for _, cg := range af.Comments {
		if cg.Pos() > af.Package {
			break
		}
		for _, c := range cg.List {
			if !constraint.IsGoBuild(c.Text) {
				continue
			}
			expr, err := constraint.Parse(c.Text)
			if err != nil {
				return false
			}
			tag, ok := expr.(*constraint.TagExpr)
			return ok && tag.Tag == "ignore"
		}
	}
	return false
}

func fileImports(fset *token.FileSet, af *ast.File) []Import {
	var imps []Import
	local := map[string]int{} // local name -> index in imps
	for _, spec := range af.Imports {
		p, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			continue // the parser accepted it, so this cannot happen
		}
		imp := Import{Path: p, Line: fset.Position(spec.Pos()).Line}
		name := path.Base(p)
		if spec.Name != nil {
			name = spec.Name.Name
		}
		switch name {
		case ".":
			imp.Dot = true
		case "_":
		default:
			local[name] = len(imps)
		}
		imps = append(imps, imp)
	}
	ast.Inspect(af, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		id, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		if i, ok := local[id.Name]; ok {
			imps[i].Refs = append(imps[i].Refs, Ref{Name: sel.Sel.Name, Line: fset.Position(sel.Pos()).Line})
		}
		return true
	})
	return imps
}
