package docs

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A Go block of the README or a guide is compiled, so the docs cannot rot:
// each becomes a function of one package (testdata/blocks, whose prelude.go
// declares the context, clients and application functions a block uses
// without declaring them), in a module that requires this one, and the
// package is built. A block is a whole file (it starts with package), a list
// of declarations, or the statements of a function body after its imports.
//
// A block may be preceded by a comment that tells the harness what the page
// around it has already said:
//
//	<!-- go: import github.com/latchkey-go/latchkey/dedup/redisstore; with err error, locker *memlock.Locker -->
//
// import names a package where its name is ambiguous (idem's redisstore
// is assumed), and with gives the function parameters the block takes from
// the text before it. Compile errors point at the Markdown line.

// knownImports are the packages a block may use without importing them,
// by the name it uses.
var knownImports = map[string]string{
	"context":       "context",
	"errors":        "errors",
	"fmt":           "fmt",
	"http":          "net/http",
	"sql":           "database/sql",
	"time":          "time",
	"filepath":      "path/filepath",
	"redis":         "github.com/redis/go-redis/v9",
	"pgx":           "github.com/jackc/pgx/v5",
	"prometheus":    "github.com/prometheus/client_golang/prometheus",
	"promhttp":      "github.com/prometheus/client_golang/prometheus/promhttp",
	"lock":          "github.com/latchkey-go/latchkey/lock",
	"memlock":       "github.com/latchkey-go/latchkey/lock/memlock",
	"redislock":     "github.com/latchkey-go/latchkey/lock/redislock",
	"sqllock":       "github.com/latchkey-go/latchkey/lock/sqllock",
	"etcdlock":      "github.com/latchkey-go/latchkey/lock/etcdlock",
	"zklock":        "github.com/latchkey-go/latchkey/lock/zklock",
	"redlock":       "github.com/latchkey-go/latchkey/lock/redlock",
	"elect":         "github.com/latchkey-go/latchkey/elect",
	"semaphore":     "github.com/latchkey-go/latchkey/semaphore",
	"rwlock":        "github.com/latchkey-go/latchkey/rwlock",
	"fence":         "github.com/latchkey-go/latchkey/fence",
	"sqlfence":      "github.com/latchkey-go/latchkey/fence/sqlfence",
	"redisfence":    "github.com/latchkey-go/latchkey/fence/redisfence",
	"state":         "github.com/latchkey-go/latchkey/state",
	"idem":          "github.com/latchkey-go/latchkey/idem",
	"idemhttp":      "github.com/latchkey-go/latchkey/idem/idemhttp",
	"redisstore":    "github.com/latchkey-go/latchkey/idem/redisstore",
	"sqlstore":      "github.com/latchkey-go/latchkey/idem/sqlstore",
	"layered":       "github.com/latchkey-go/latchkey/idem/layered",
	"dedup":         "github.com/latchkey-go/latchkey/dedup",
	"bloomfilter":   "github.com/latchkey-go/latchkey/dedup/bloomfilter",
	"sqlinbox":      "github.com/latchkey-go/latchkey/dedup/sqlinbox",
	"redisconsumer": "github.com/latchkey-go/latchkey/dedup/redisconsumer",
	"natsconsumer":  "github.com/latchkey-go/latchkey/dedup/natsconsumer",
	"amqpconsumer":  "github.com/latchkey-go/latchkey/dedup/amqpconsumer",
	"metrics":       "github.com/latchkey-go/latchkey/metrics",
	"latchkeyotel":  "github.com/latchkey-go/latchkey/latchkeyotel",
}

// goBlockAt finds a Go block with the optional hint comment on the line above.
var goBlockAt = regexp.MustCompile("(?m)(?:^<!-- go: (.*) -->\n)?^```go\n((?s:.*?))^```")

// block is one Go block of a page.
type block struct {
	page string // path, relative to docs/
	n    int    // its number on the page, from 1
	line int    // the line of its first statement
	src  string
	hint string
}

func (b block) String() string { return fmt.Sprintf("%s, Go block %d (line %d)", b.page, b.n, b.line) }

func blocksOf(t *testing.T, page string) []block {
	t.Helper()
	text, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var out []block
	for i, m := range goBlockAt.FindAllSubmatchIndex(text, -1) {
		b := block{page: page, n: i + 1, src: string(text[m[4]:m[5]])}
		if m[2] >= 0 {
			b.hint = string(text[m[2]:m[3]])
		}
		b.line = bytes.Count(text[:m[4]], []byte("\n")) + 1
		out = append(out, b)
	}
	return out
}

func TestGoBlocksCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a package of every Go block; run without -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to compile the docs' Go blocks: %v", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	mod := t.TempDir()
	prelude, err := os.ReadFile("testdata/blocks/prelude.go")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile("../go.sum")
	if err != nil {
		t.Fatal(err)
	}
	gomod := "module docblocks\n\ngo 1.26.0\n\nrequire github.com/latchkey-go/latchkey v0.0.0\n\nreplace github.com/latchkey-go/latchkey => " + strconv.Quote(root) + "\n"
	files := map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "prelude.go": prelude}
	count := 0
	for _, p := range pages(t) {
		for _, b := range blocksOf(t, p) {
			src, err := b.file()
			if err != nil {
				t.Errorf("%v: %v\n%s", b, err, b.src)
				continue
			}
			files[fmt.Sprintf("block%03d.go", count)] = []byte(src)
			count++
		}
	}
	if count < 20 {
		t.Fatalf("found %d Go blocks; the pattern missed them", count)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(mod, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(goTool, "build", "-mod=mod", "-gcflags=-e", "-o", os.DevNull, ".")
	cmd.Dir = mod
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the Go blocks do not compile (%v); each error names the page and line:\n%s", err, out)
	}
}

// file returns the block as a Go file of package blocks.
func (b block) file() (string, error) {
	fset := token.NewFileSet()
	page := filepath.ToSlash(filepath.Join("docs", b.page))
	at := func(line int) string { return fmt.Sprintf("\n//line %s:%d\n", page, line) }
	if strings.HasPrefix(strings.TrimSpace(b.src), "package ") {
		src := "package blocks" + at(b.line+1) + strings.SplitN(b.src, "\n", 2)[1]
		_, err := parser.ParseFile(fset, "block.go", src, 0)
		return src, err
	}
	imports, body, bodyLine := splitImports(b.src, b.line)
	h, err := parseHint(b.hint)
	if err != nil {
		return "", err
	}
	// Declarations.
	if f, err := parser.ParseFile(fset, "block.go", "package blocks\n"+imports+"\n"+body, 0); err == nil {
		return "package blocks\n" + importDecl(f, h) + at(bodyLine) + body, nil
	}
	// Statements.
	fn := "package blocks\n" + imports + "\nfunc _(" + h.params + ") error {\n" + body + "\n}\n"
	f, err := parser.ParseFile(fset, "block.go", fn, 0)
	if err != nil {
		return "", err
	}
	var uses strings.Builder
	for _, name := range declaredAtTop(f) {
		uses.WriteString("\t_ = " + name + "\n")
	}
	return "package blocks\n" + importDecl(f, h) + "\nfunc _(" + h.params + ") error {" +
		at(bodyLine) + body + "\n" + uses.String() + "\treturn nil\n}\n", nil
}

// hint is what a block's comment says.
type hint struct {
	imports map[string]string // by package name
	params  string
}

func parseHint(s string) (hint, error) {
	h := hint{imports: map[string]string{}}
	for clause := range strings.SplitSeq(s, ";") {
		clause = strings.TrimSpace(clause)
		switch {
		case clause == "":
		case strings.HasPrefix(clause, "import "):
			path := strings.TrimSpace(strings.TrimPrefix(clause, "import "))
			h.imports[path[strings.LastIndex(path, "/")+1:]] = path
		case strings.HasPrefix(clause, "with "):
			h.params = strings.TrimSpace(strings.TrimPrefix(clause, "with "))
		default:
			return h, fmt.Errorf("the comment above the block says %q: want import PATH or with PARAMS", clause)
		}
	}
	return h, nil
}

// importDecl is the file's import declaration: the block's own imports and
// the known packages it names without importing.
func importDecl(f *ast.File, h hint) string {
	paths := map[string]bool{}
	named := map[string]bool{}
	for _, spec := range f.Imports {
		p, _ := strconv.Unquote(spec.Path.Value)
		paths[spec.Path.Value] = true
		named[p[strings.LastIndex(p, "/")+1:]] = true
		if spec.Name != nil {
			named[spec.Name.Name] = true
		}
	}
	var lines []string
	for _, spec := range f.Imports {
		name := ""
		if spec.Name != nil {
			name = spec.Name.Name + " "
		}
		lines = append(lines, "\t"+name+spec.Path.Value)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		x, ok := sel.X.(*ast.Ident)
		if !ok || named[x.Name] {
			return true
		}
		path, ok := h.imports[x.Name]
		if !ok {
			path, ok = knownImports[x.Name]
		}
		if ok && !paths[strconv.Quote(path)] {
			paths[strconv.Quote(path)] = true
			named[x.Name] = true
			lines = append(lines, "\t"+strconv.Quote(path))
		}
		return true
	})
	slices.Sort(lines)
	return "import (\n" + strings.Join(lines, "\n") + "\n)\n"
}

// declaredAtTop returns the variables the function's body declares at its
// top level: a fragment may declare what the page uses after it.
func declaredAtTop(f *ast.File) []string {
	var names []string
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok {
			for _, s := range fn.Body.List {
				for _, id := range declaredBy(s) {
					if id.Name != "_" && !slices.Contains(names, id.Name) {
						names = append(names, id.Name)
					}
				}
			}
		}
	}
	return names
}

// declaredBy returns the names a statement declares: x, y := ... or var x T.
func declaredBy(s ast.Stmt) []*ast.Ident {
	var ids []*ast.Ident
	switch s := s.(type) {
	case *ast.AssignStmt:
		if s.Tok == token.DEFINE {
			for _, e := range s.Lhs {
				ids = append(ids, e.(*ast.Ident))
			}
		}
	case *ast.DeclStmt:
		if g, ok := s.Decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
			for _, spec := range g.Specs {
				ids = append(ids, spec.(*ast.ValueSpec).Names...)
			}
		}
	}
	return ids
}

// splitImports returns a block's leading import declarations, the rest, and
// the Markdown line the rest starts on.
func splitImports(src string, line int) (imports, rest string, restLine int) {
	s := src
	skip := func(n int) {
		line += strings.Count(s[:n], "\n")
		s = s[n:]
	}
	trim := func() { skip(len(s) - len(strings.TrimLeft(s, "\n"))) }
	trim()
	for strings.HasPrefix(s, "import ") {
		end := strings.Index(s, "\n")
		if strings.HasPrefix(s, "import (") {
			end = strings.Index(s, "\n)") + 2
		}
		if end < 0 {
			end = len(s)
		}
		imports += s[:end] + "\n"
		skip(end)
		trim()
	}
	return imports, s, line
}
