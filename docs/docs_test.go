// Package docs holds the guides; its test keeps them from rotting: every
// relative link of the README and the guides names a file that exists, every
// Go block compiles, the README stays short and so do the package docs.
package docs

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pages are the Markdown files the test reads, relative to the repository.
func pages(t *testing.T) []string {
	t.Helper()
	guides, err := filepath.Glob("*.md")
	if err != nil || len(guides) == 0 {
		t.Fatalf("no guides in docs/: %v", err)
	}
	out := []string{"../README.md", "../CONTRIBUTING.md", "../SECURITY.md", "../CHANGELOG.md", "../cmd/latchkey/README.md"}
	return append(out, guides...)
}

var link = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)

func TestLinksResolve(t *testing.T) {
	for _, p := range pages(t) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(p), target)); err != nil {
				t.Errorf("%s links to %s, which does not exist", p, target)
			}
		}
	}
}

// TestREADMEShort: the README introduces; the guides explain.
func TestREADMEShort(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > 300 {
		t.Fatalf("README.md has %d lines, more than 300: move the detail to a guide in docs/", n)
	}
}

// maxPackageDoc is the most lines a package's doc comment may take: the
// contract, the guarantee and a short example; internals go to a guide.
const maxPackageDoc = 80

// TestPackageDocsAreShort reads every package's doc comment (bench, a
// module of its own, aside) and fails for one longer than maxPackageDoc.
func TestPackageDocsAreShort(t *testing.T) {
	seen := 0
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "bench" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		if f.Doc == nil {
			return nil
		}
		seen++
		if n := len(strings.Split(strings.TrimSpace(f.Doc.Text()), "\n")); n > maxPackageDoc {
			t.Errorf("%s: the package doc has %d lines, more than %d: move the internals to a guide in docs/", path, n, maxPackageDoc)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 20 {
		t.Fatalf("read %d package docs; the walk missed the packages", seen)
	}
}
