//lint:file-ignore SA1019 go/parser's resolution of identifiers is what a block has before it compiles: go/types needs the imports this package is about to add.

package doccheck

import (
	"go/ast"
	"go/token"
	"strings"
)

// unresolved returns the names that file f uses and does not declare:
// the packages it names, the variables it takes for granted, the
// predeclared identifiers.
func unresolved(f *ast.File) map[string]bool {
	names := map[string]bool{}
	for _, id := range f.Unresolved {
		names[id.Name] = true
	}
	return names
}

// completions returns the changes that make file f, a block wrapped by
// goFile, compile as the block means: each variable the block declares in
// a function and does not use is used (_ = x after its declaration), and
// the wrapper's final return goes when the block ends with a return of its
// own.
func completions(f *ast.File) []change {
	// The identifiers that only assign to a variable: an assignment's
	// left-hand side, x++. Every other reference is a use, as the compiler
	// counts them.
	assigns := map[*ast.Ident]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch s := n.(type) {
		case *ast.AssignStmt:
			for _, e := range s.Lhs {
				if id, ok := e.(*ast.Ident); ok {
					assigns[id] = true
				}
			}
		case *ast.IncDecStmt:
			if id, ok := s.X.(*ast.Ident); ok {
				assigns[id] = true
			}
		}
		return true
	})
	used := map[*ast.Object]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && id.Obj != nil && id.Obj.Kind == ast.Var && !assigns[id] && !declares(id) {
			used[id.Obj] = true
		}
		return true
	})

	var changes []change
	list := func(stmts []ast.Stmt) {
		for _, s := range stmts {
			var unused []string
			for _, id := range declared(s) {
				if id.Name != "_" && !used[id.Obj] {
					unused = append(unused, id.Name)
				}
			}
			if len(unused) > 0 {
				changes = append(changes, change{s.End(), s.End(), "; _ = " + strings.Join(unused, "; _ = ")})
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch s := n.(type) {
		case *ast.BlockStmt:
			list(s.List)
		case *ast.CaseClause:
			list(s.Body)
		case *ast.CommClause:
			list(s.Body)
		}
		return true
	})

	// The wrapper is the file's last declaration; its last statement is
	// the return goFile added, which a return of the block's own makes
	// unreachable.
	if len(f.Decls) > 0 {
		if fn, ok := f.Decls[len(f.Decls)-1].(*ast.FuncDecl); ok && fn.Name.Name == "_" && fn.Body != nil {
			if l := fn.Body.List; len(l) >= 2 && terminates(l[len(l)-2]) {
				last := l[len(l)-1]
				changes = append(changes, change{last.Pos(), last.End(), ""})
			}
		}
	}
	return changes
}

// declares reports whether id is where its variable is declared.
func declares(id *ast.Ident) bool {
	switch d := id.Obj.Decl.(type) {
	case *ast.AssignStmt:
		if d.Tok != token.DEFINE {
			return false
		}
		for _, e := range d.Lhs {
			if e == id {
				return true
			}
		}
	case *ast.ValueSpec:
		for _, n := range d.Names {
			if n == id {
				return true
			}
		}
	}
	return false
}

// declared returns the variables that statement s declares: x, y := ...
// or var x T.
func declared(s ast.Stmt) []*ast.Ident {
	var ids []*ast.Ident
	switch s := s.(type) {
	case *ast.AssignStmt:
		if s.Tok != token.DEFINE {
			return nil
		}
		for _, e := range s.Lhs {
			if id, ok := e.(*ast.Ident); ok && id.Obj != nil && id.Obj.Decl == s {
				ids = append(ids, id)
			}
		}
	case *ast.DeclStmt:
		gd, ok := s.Decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.VAR {
			return nil
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for _, id := range vs.Names {
				if id.Obj != nil && id.Obj.Decl == vs {
					ids = append(ids, id)
				}
			}
		}
	}
	return ids
}

// terminates reports whether statement s ends its function: a return or
// a call of panic.
func terminates(s ast.Stmt) bool {
	switch s := s.(type) {
	case *ast.ReturnStmt:
		return true
	case *ast.ExprStmt:
		call, ok := s.X.(*ast.CallExpr)
		if !ok {
			return false
		}
		id, ok := call.Fun.(*ast.Ident)
		return ok && id.Name == "panic" && id.Obj == nil
	}
	return false
}
