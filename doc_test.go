package atomicredis

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Sizes a reader holds in a sitting: a library function of at most
// maxFuncLines lines, a library file of at most maxFileLines, and
// engine.go, the door to the rest, under maxEngineLines.
const (
	maxFuncLines   = 80
	maxFileLines   = 600
	maxEngineLines = 300
)

// TestDoc_Sizes holds the library's files and functions to their sizes,
// and doc.go's map to the files there are.
func TestDoc_Sizes(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		if !strings.Contains(string(doc), "\t"+name+" ") {
			t.Errorf("doc.go's map does not name %s", name)
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		lines := fset.File(f.Pos()).LineCount()
		limit := maxFileLines
		if name == "engine.go" {
			limit = maxEngineLines - 1
		}
		if lines > limit {
			t.Errorf("%s has %d lines; at most %d", name, lines, limit)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if n > maxFuncLines {
				t.Errorf("%s: %s has %d lines; at most %d", fset.Position(fn.Pos()), fn.Name.Name, n, maxFuncLines)
			}
		}
	}
}
