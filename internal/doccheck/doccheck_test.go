// Package doccheck holds the test that the repository stands alone: every
// relative link in its Markdown and every file path its docs and Go
// comments name exists in the repository, and nothing refers to files
// outside it (a clone has nothing beside the repository).
package doccheck

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the module root (this package is internal/doccheck).
var root = func() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return filepath.Dir(filepath.Dir(wd))
}()

// skipDir are directories whose files are not the repository's own
// prose: build output, VCS data, recorded data.
var skipDir = map[string]bool{".git": true, "bin": true, "testdata": true, "node_modules": true}

func walk(t *testing.T, ext string, fn func(rel string, b []byte)) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (skipDir[d.Name()] || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ext) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fn(rel, b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

var (
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// a path-like token naming a file of the repository: at least one
	// directory and a known extension
	pathRef = regexp.MustCompile("(?:^|[\\s`(\"'])((?:\\.\\./|\\./)?[A-Za-z0-9_][A-Za-z0-9_.-]*(?:/[A-Za-z0-9_.-]+)+\\.(?:md|go|sh|mk|s|txt|json|yaml|yml|svg|tsv|csv))\\b")
	// files outside the repository that once were cited
	outside = regexp.MustCompile(`\.\./shared|\bDESIGN\.md\b`)
)

// exists says whether ref names a file, relative to dir or to the root.
func exists(dir, ref string) bool {
	for _, base := range []string{dir, root} {
		if _, err := os.Stat(filepath.Join(base, ref)); err == nil {
			return true
		}
	}
	return false
}

func external(ref string) bool {
	return strings.Contains(ref, "://") || strings.HasPrefix(ref, "mailto:") || strings.HasPrefix(ref, "#")
}

// TestMarkdownLinks: every relative link of every .md file resolves.
func TestMarkdownLinks(t *testing.T) {
	n := 0
	walk(t, ".md", func(rel string, b []byte) {
		dir := filepath.Join(root, filepath.Dir(rel))
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				ref := m[1]
				if external(ref) {
					continue
				}
				ref, _, _ = strings.Cut(ref, "#")
				n++
				if _, err := os.Stat(filepath.Join(dir, ref)); err != nil {
					t.Errorf("%s:%d: link to %q: no such file in the repository", rel, i+1, m[1])
				}
			}
		}
	})
	t.Logf("%d relative links checked", n)
}

// TestReferencedFilesExist: every repository path a .md file's text or a
// Go comment names (dir/file.ext) exists, relative to the file or to the
// root; nothing cites a file outside the repository.
func TestReferencedFilesExist(t *testing.T) {
	n := 0
	check := func(rel string, line int, text string) {
		dir := filepath.Join(root, filepath.Dir(rel))
		if outside.MatchString(text) {
			t.Errorf("%s:%d: cites a file outside the repository: %q", rel, line, strings.TrimSpace(text))
		}
		for _, m := range pathRef.FindAllStringSubmatch(text, -1) {
			ref := strings.TrimSuffix(m[1], ".")
			if external(ref) || strings.Contains(text, "://"+ref) || strings.HasPrefix(ref, "github.com/") || strings.HasPrefix(ref, "golang.org/") {
				continue
			}
			n++
			if !exists(dir, ref) {
				t.Errorf("%s:%d: names %q, which is not in the repository", rel, line, ref)
			}
		}
	}
	walk(t, ".md", func(rel string, b []byte) {
		for i, line := range strings.Split(string(b), "\n") {
			check(rel, i+1, line)
		}
	})
	fset := token.NewFileSet()
	walk(t, ".go", func(rel string, b []byte) {
		f, err := parser.ParseFile(fset, rel, b, parser.ParseComments)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return
		}
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				line := fset.Position(c.Pos()).Line
				for j, l := range strings.Split(c.Text, "\n") {
					check(rel, line+j, l)
				}
			}
		}
	})
	t.Logf("%d file references checked", n)
}
