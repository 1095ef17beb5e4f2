package market

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// forbiddenIdents are types whose rounding differs between machines or
// compilers (fused multiply-add) and so cannot appear in replicated state.
var forbiddenIdents = map[string]bool{"float32": true, "float64": true, "complex64": true, "complex128": true}

// forbiddenImports draw randomness; the FSM gets random values from commands.
var forbiddenImports = map[string]bool{"math/rand": true, "math/rand/v2": true, "crypto/rand": true}

// forbiddenTimeCalls read the wall clock; the FSM's time is the entry's stamp.
var forbiddenTimeCalls = map[string]bool{"Now": true, "Since": true, "Until": true}

// purityViolations lists the forbidden constructs of one source file. It
// reads the syntax tree, so comments and strings that merely mention them
// do not count.
func purityViolations(fset *token.FileSet, name string, src any) ([]string, error) {
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	timeName := ""
	var out []string
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if forbiddenImports[path] {
			out = append(out, fset.Position(imp.Pos()).String()+": imports "+path)
		}
		if path == "time" {
			timeName = "time"
			if imp.Name != nil {
				timeName = imp.Name.Name
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			if forbiddenIdents[n.Name] {
				out = append(out, fset.Position(n.Pos()).String()+": uses "+n.Name)
			}
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok && timeName != "" && x.Name == timeName && forbiddenTimeCalls[n.Sel.Name] {
				out = append(out, fset.Position(n.Pos()).String()+": calls time."+n.Sel.Name)
			}
		}
		return true
	})
	return out, nil
}

func TestFSMHasNoFloatsClockOrRandomness(t *testing.T) {
	root := filepath.Join("..") // the fsm/ folder
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		checked++
		bad, err := purityViolations(fset, path, nil)
		if err != nil {
			return err
		}
		for _, b := range bad {
			t.Error(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no source files found under fsm/: the walk is broken")
	}
}

func TestPurityCheckerCatchesViolations(t *testing.T) {
	src := `package x
import (
	clock "time"
	"math/rand"
)
// float64 in a comment is fine, and so is "time.Now" in a string.
var s = "float32"
func f() float64 { _ = clock.Now(); _ = rand.Int(); return 0 }
`
	bad, err := purityViolations(token.NewFileSet(), "x.go", src)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"imports math/rand", "uses float64", "calls time.Now"}
	if len(bad) != len(want) {
		t.Fatalf("violations = %v, want %d", bad, len(want))
	}
	for i, w := range want {
		if !strings.HasSuffix(bad[i], w) {
			t.Errorf("violation %d = %q, want suffix %q", i, bad[i], w)
		}
	}
}
