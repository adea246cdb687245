// Command apicheck records the exported API of every module of the
// repository, one file per module under api/, and checks the tree against
// the record, as Go's own api/ files are checked: every change to the API is
// then a change to a file that review sees.
//
// Usage, from the repository's root:
//
//	go run ./internal/apicheck       # check: exit 1, naming each line, if the API differs from api/
//	go run ./internal/apicheck -w    # write api/ anew
//
// A line names one exported thing of one package: a function or method with
// its signature, a type (a struct's exported fields and an interface's
// methods a line each), a constant or variable. Test files, main packages,
// and directories named internal, testdata or benchmarks are left out; a
// file built only on some platforms counts as if built on all.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

func main() {
	write := flag.Bool("w", false, "write api/ anew instead of checking it")
	flag.Parse()
	apis, err := collect(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "apicheck:", err)
		os.Exit(2)
	}
	if *write {
		if err := writeAll("api", apis); err != nil {
			fmt.Fprintln(os.Stderr, "apicheck:", err)
			os.Exit(2)
		}
		return
	}
	if diff := check("api", apis); len(diff) > 0 {
		fmt.Println("The exported API differs from its record in api/:")
		for _, d := range diff {
			fmt.Println(d)
		}
		fmt.Println("If the change is meant, run `make api` and commit api/ with it.")
		os.Exit(1)
	}
}

// A module is a go.mod's directory and module path.
type module struct{ dir, path string }

// recordName is the file under api/ that records module m: core.txt for
// the repository's root module, the directory with '-' for '/' otherwise.
func (m module) recordName() string {
	if m.dir == "." {
		return "core.txt"
	}
	return strings.ReplaceAll(m.dir, "/", "-") + ".txt"
}

// collect returns the API lines of every module under root, by record
// file name, sorted.
func collect(root string) (map[string][]string, error) {
	mods := map[string]module{} // by directory
	apis := map[string][]string{}
	pkgs := map[string][]*ast.File{} // by directory
	var dirs []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "internal" || name == "testdata" || name == "benchmarks" || strings.HasPrefix(name, ".") || name == "api") {
				return filepath.SkipDir
			}
			if b, err := os.ReadFile(filepath.Join(path, "go.mod")); err == nil {
				mods[path] = module{dir: filepath.ToSlash(path), path: modulePath(b)}
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if f.Name.Name == "main" {
			return nil
		}
		dir := filepath.Dir(path)
		if _, ok := pkgs[dir]; !ok {
			dirs = append(dirs, dir)
		}
		pkgs[dir] = append(pkgs[dir], f)
		return nil
	})
	for _, dir := range dirs {
		m := owner(mods, dir)
		rel, _ := filepath.Rel(m.dir, dir)
		pkg := m.path
		if rel != "." {
			pkg += "/" + filepath.ToSlash(rel)
		}
		if ls := lines(fset, pkg, pkgs[dir]); len(ls) > 0 {
			apis[m.recordName()] = append(apis[m.recordName()], ls...)
		}
	}
	for k, v := range apis {
		slices.Sort(v)
		apis[k] = slices.Compact(v)
	}
	return apis, err
}

// owner returns the module of directory dir: its nearest go.mod.
func owner(mods map[string]module, dir string) module {
	for {
		if m, ok := mods[dir]; ok {
			return m
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return module{dir: ".", path: "?"}
		}
		dir = parent
	}
}

func modulePath(gomod []byte) string {
	s := bufio.NewScanner(bytes.NewReader(gomod))
	for s.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return "?"
}

// lines returns the API lines of package pkg, made of files. A method
// that an exported struct type gets from an unexported type it embeds is
// a method of the exported type: it is recorded as one.
func lines(fset *token.FileSet, pkg string, files []*ast.File) []string {
	var out []string
	add := func(format string, args ...any) {
		out = append(out, "pkg "+pkg+", "+fmt.Sprintf(format, args...))
	}
	expr := func(n ast.Node) string {
		var b bytes.Buffer
		_ = printer.Fprint(&b, fset, n)
		return strings.Join(strings.Fields(b.String()), " ")
	}
	methods := map[string][]string{} // receiver type name → its exported methods, name and signature
	embeds := map[string][]string{}  // exported struct type → the unexported types it embeds
	for _, f := range files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				sig := signature(expr, d.Type)
				if d.Recv == nil {
					add("func %s%s%s", d.Name.Name, typeParams(expr, d.Type.TypeParams), sig)
					continue
				}
				recv := d.Recv.List[0].Type
				if name := recvName(recv); name != "" {
					methods[name] = append(methods[name], d.Name.Name+sig)
				}
				if exportedRecv(recv) {
					add("method (%s) %s%s", expr(recv), d.Name.Name, sig)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						typeLines(add, expr, s)
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, fld := range st.Fields.List {
								if name := recvName(fld.Type); len(fld.Names) == 0 && name != "" && !ast.IsExported(name) {
									embeds[s.Name.Name] = append(embeds[s.Name.Name], name)
								}
							}
						}
					case *ast.ValueSpec:
						for i, n := range s.Names {
							if !n.IsExported() {
								continue
							}
							line := d.Tok.String() + " " + n.Name
							if s.Type != nil {
								line += " " + expr(s.Type)
							}
							if i < len(s.Values) {
								if v := expr(s.Values[i]); len(v) <= 80 {
									line += " = " + v
								}
							}
							add("%s", line)
						}
					}
				}
			}
		}
	}
	for t, inner := range embeds {
		for _, u := range inner {
			for _, m := range methods[u] {
				add("method (%s) %s (promoted from %s)", t, m, u)
			}
		}
	}
	return out
}

// recvName returns the name of the type t names, through a pointer and
// type arguments, or "".
func recvName(t ast.Expr) string {
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// exportedRecv reports whether a method's receiver type is exported.
func exportedRecv(t ast.Expr) bool {
	name := recvName(t)
	return name != "" && ast.IsExported(name)
}

// typeLines adds a type's lines: the type, then its exported fields or
// methods.
func typeLines(add func(string, ...any), expr func(ast.Node) string, s *ast.TypeSpec) {
	name := s.Name.Name + typeParams(expr, s.TypeParams)
	if s.Assign.IsValid() {
		add("type %s = %s", name, expr(s.Type))
		return
	}
	switch t := s.Type.(type) {
	case *ast.StructType:
		add("type %s struct", name)
		for _, f := range t.Fields.List {
			if len(f.Names) == 0 {
				if exportedRecv(f.Type) {
					add("type %s struct, embedded %s", name, expr(f.Type))
				}
				continue
			}
			for _, n := range f.Names {
				if n.IsExported() {
					add("type %s struct, %s %s", name, n.Name, expr(f.Type))
				}
			}
		}
	case *ast.InterfaceType:
		add("type %s interface", name)
		for _, m := range t.Methods.List {
			if len(m.Names) == 0 {
				add("type %s interface, embedded %s", name, expr(m.Type))
				continue
			}
			if ft, ok := m.Type.(*ast.FuncType); ok {
				for _, n := range m.Names {
					add("type %s interface, %s%s", name, n.Name, signature(expr, ft))
				}
			}
		}
	default:
		add("type %s %s", name, expr(s.Type))
	}
}

// signature renders a function type's parameters and results by type
// alone: names are not the API.
func signature(expr func(ast.Node) string, ft *ast.FuncType) string {
	list := func(fl *ast.FieldList) []string {
		var out []string
		if fl == nil {
			return nil
		}
		for _, f := range fl.List {
			n := max(len(f.Names), 1)
			for range n {
				out = append(out, expr(f.Type))
			}
		}
		return out
	}
	s := "(" + strings.Join(list(ft.Params), ", ") + ")"
	switch r := list(ft.Results); len(r) {
	case 0:
	case 1:
		s += " " + r[0]
	default:
		s += " (" + strings.Join(r, ", ") + ")"
	}
	return s
}

func typeParams(expr func(ast.Node) string, fl *ast.FieldList) string {
	if fl == nil || len(fl.List) == 0 {
		return ""
	}
	var ps []string
	for _, f := range fl.List {
		for _, n := range f.Names {
			ps = append(ps, n.Name+" "+expr(f.Type))
		}
	}
	return "[" + strings.Join(ps, ", ") + "]"
}

// writeAll writes each module's record under dir, and removes records of
// modules that no longer export anything.
func writeAll(dir string, apis map[string][]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(dir, "*.txt"))
	for _, p := range old {
		if _, ok := apis[filepath.Base(p)]; !ok {
			if err := os.Remove(p); err != nil {
				return err
			}
		}
	}
	for name, ls := range apis {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(ls, "\n")+"\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// check returns the differences between apis and the records under dir:
// "+ line" for a line the tree has and the record has not, "- line" for
// the other way, each prefixed by its record's name.
func check(dir string, apis map[string][]string) []string {
	var diff []string
	names := map[string]bool{}
	for n := range apis {
		names[n] = true
	}
	old, _ := filepath.Glob(filepath.Join(dir, "*.txt"))
	for _, p := range old {
		names[filepath.Base(p)] = true
	}
	sorted := slices.Sorted(func(yield func(string) bool) {
		for n := range names {
			if !yield(n) {
				return
			}
		}
	})
	for _, name := range sorted {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		recorded := map[string]bool{}
		for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
			if l != "" {
				recorded[l] = true
			}
		}
		now := map[string]bool{}
		for _, l := range apis[name] {
			now[l] = true
			if !recorded[l] {
				diff = append(diff, fmt.Sprintf("%s: + %s", name, l))
			}
		}
		var gone []string
		for l := range recorded {
			if !now[l] {
				gone = append(gone, fmt.Sprintf("%s: - %s", name, l))
			}
		}
		slices.Sort(gone)
		diff = append(diff, gone...)
	}
	return diff
}
