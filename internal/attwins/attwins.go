// Package attwins checks the rule for time of the packages that read a
// clock: an exported method that reads the clock has a twin named ...At
// that takes the time instead, and only a method named ...At takes a time.
// The source is the reference: a method reads the clock when its body
// calls clock.Now (a field or variable named clock).
package attwins

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
)

// Check reads the non-test Go files of dir and returns every breach of
// the rule, and how many exported methods it read.
func Check(dir string) (breaches []string, methods int, err error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, 0, err
	}
	fset := token.NewFileSet()
	byName := map[string]*ast.FuncDecl{} // "Type.Method"
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			return nil, 0, err
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
				byName[id.Name+"."+fd.Name.Name] = fd
			}
		}
	}
	for name, fd := range byName {
		takesNow := false
		for _, p := range fd.Type.Params.List {
			for _, n := range p.Names {
				takesNow = takesNow || n.Name == "now"
			}
		}
		if at := strings.HasSuffix(name, "At"); takesNow != at {
			breaches = append(breaches, fmt.Sprintf("%s takes a time: %v; its name ends in At: %v", name, takesNow, at))
		}
		if readsClock(fd.Body) {
			if _, ok := byName[name+"At"]; !ok {
				breaches = append(breaches, fmt.Sprintf("%s reads the clock and has no %sAt", name, fd.Name.Name))
			}
		}
	}
	sort.Strings(breaches)
	return breaches, len(byName), nil
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
