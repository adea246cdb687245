package window

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// The package's rule for time: an exported method that reads the clock has
// a twin named ...At that takes the time instead, and only a method named
// ...At takes a time. The source is the reference: a method reads the clock
// when its body calls clock.Now.
func TestEveryMethodThatReadsTheClockHasAnAtTwin(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	methods := map[string]*ast.FuncDecl{} // "Type.Method"
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || !fd.Name.IsExported() {
				continue
			}
			recv := fd.Recv.List[0].Type
			if st, ok := recv.(*ast.StarExpr); ok {
				recv = st.X
			}
			if id, ok := recv.(*ast.Ident); ok && id.IsExported() {
				methods[id.Name+"."+fd.Name.Name] = fd
			}
		}
	}
	if len(methods) < 20 {
		t.Fatalf("found %d exported methods: the test reads the wrong files", len(methods))
	}
	for name, fd := range methods {
		takesNow := false
		for _, p := range fd.Type.Params.List {
			for _, n := range p.Names {
				takesNow = takesNow || n.Name == "now"
			}
		}
		if at := strings.HasSuffix(name, "At"); takesNow != at {
			t.Errorf("%s takes a time: %v; its name ends in At: %v", name, takesNow, at)
		}
		if readsClock(fd.Body) {
			if _, ok := methods[name+"At"]; !ok {
				t.Errorf("%s reads the clock and has no %sAt", name, fd.Name.Name)
			}
		}
	}
}

// readsClock reports whether body calls a clock's Now.
func readsClock(body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Now" {
			if x, ok := sel.X.(*ast.SelectorExpr); ok && x.Sel.Name == "clock" {
				found = true
			}
		}
		return true
	})
	return found
}
