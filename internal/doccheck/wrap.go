package doccheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"slices"
	"strings"
)

// importPaths is where the packages that blocks name come from: the
// package name a block uses, and the path the test imports it from when
// the block does not import it. It holds the repository's packages and the
// few others the docs show; imports.go requires the ones outside the
// standard library.
var importPaths = map[string]string{
	// The standard library.
	"context": "context",
	"errors":  "errors",
	"fmt":     "fmt",
	"http":    "net/http",
	"json":    "encoding/json",
	"log":     "log",
	"netip":   "net/netip",
	"os":      "os",
	"slog":    "log/slog",
	"time":    "time",

	// The repository's packages.
	"slidegate": "github.com/slidegate/slidegate",
	"breaker":   "github.com/slidegate/slidegate/breaker",
	"clock":     "github.com/slidegate/slidegate/clock",
	"cpu":       "github.com/slidegate/slidegate/cpu",
	"dashboard": "github.com/slidegate/slidegate/dashboard",
	"flow":      "github.com/slidegate/slidegate/flow",
	"rulefile":  "github.com/slidegate/slidegate/rulefile",
	"window":    "github.com/slidegate/slidegate/window",
	"httpguard": "github.com/slidegate/slidegate/middleware/httpguard",
	"chiguard":  "github.com/slidegate/slidegate/middleware/chiguard",
	"echoguard": "github.com/slidegate/slidegate/middleware/echoguard",
	"ginguard":  "github.com/slidegate/slidegate/middleware/ginguard",
	"grpcguard": "github.com/slidegate/slidegate/middleware/grpcguard",
	"etcdrules": "github.com/slidegate/slidegate/etcdrules",
	"metrics":   "github.com/slidegate/slidegate/metrics",
	"otelguard": "github.com/slidegate/slidegate/otelguard",
	"redisflow": "github.com/slidegate/slidegate/redisflow",

	// What the integrations work with, as the docs name them.
	"chi":        "github.com/go-chi/chi/v5",
	"clientv3":   "go.etcd.io/etcd/client/v3",
	"echo":       "github.com/labstack/echo/v4",
	"gin":        "github.com/gin-gonic/gin",
	"grpc":       "google.golang.org/grpc",
	"metric":     "go.opentelemetry.io/otel/metric",
	"prometheus": "github.com/prometheus/client_golang/prometheus",
	"promhttp":   "github.com/prometheus/client_golang/prometheus/promhttp",
	"redis":      "github.com/redis/go-redis/v9",
	"sdkmetric":  "go.opentelemetry.io/otel/sdk/metric",
}

// conventional declares, by name, the variables that blocks use without
// declaring them: the guard, the context, a mux, the caller's functions. A
// block that uses one of them and does not declare it gets it, of this
// type, at package level.
var conventional = map[string]string{
	"g":              "*slidegate.Guard",
	"ctx":            "context.Context",
	"mux":            "*http.ServeMux",
	"cluster":        "*redisflow.Cluster",
	"rdb":            "*redis.Client",
	"client":         "*clientv3.Client",
	"meterProvider":  "metric.MeterProvider",
	"addr":           "string",
	"userID":         "string",
	"elapsed":        "time.Duration",
	"logging":        "func(http.Handler) http.Handler",
	"callDependency": "func(context.Context) error",
	"query":          "func(context.Context) error",
	"call":           "func() error",
	"search":         "func() error",
	"serveFromCache": "func() error",
	"page":           "func(message string)",
}

// resetDirective stands for the line directive that gives the lines after
// a block's code back to the generated file, until the file is assembled
// and the line is known.
const resetDirective = "//line @reset@"

// goFile returns the Go file that Go block b becomes, in package pkg. The
// block's lines keep their Markdown lines and columns through line
// directives, so that the compiler's messages name them: mdPath is the
// Markdown file's path for the directives, and genPath the generated
// file's, for the lines the block does not have.
func goFile(b block, pkg, mdPath, genPath string) []byte {
	at := fmt.Sprintf("//line %s:%d:1\n", mdPath, b.codeLine())
	if hasPackageClause(b.code) {
		return []byte(at + b.code)
	}
	lines := strings.Split(strings.TrimSuffix(b.code, "\n"), "\n")
	decl := declarationLines(b.code, len(lines))
	var body strings.Builder
	fmt.Fprintf(&body, "package %s\n%s", pkg, at)
	for i, l := range lines {
		if decl[i] {
			body.WriteString(l)
		}
		body.WriteString("\n")
	}
	body.WriteString("func _() error {\n" + at)
	for i, l := range lines {
		if !decl[i] {
			body.WriteString(l)
		}
		body.WriteString("\n")
	}
	body.WriteString(resetDirective + "\n\treturn nil\n}\n")
	src := body.String()

	// A block that does not parse is left to the compiler to report.
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, 0)
	if err != nil {
		return assemble(pkg, src, nil, nil, genPath)
	}
	src = apply(src, fset, completions(f))
	free := unresolved(f)
	var preamble []string
	for _, name := range sortedKeys(conventional) {
		if free[name] {
			preamble = append(preamble, fmt.Sprintf("var %s %s", name, conventional[name]))
		}
	}
	// The packages the block and its preamble name, less those it imports.
	withPreamble := src + strings.Join(preamble, "\n") + "\n"
	if pf, err := parser.ParseFile(token.NewFileSet(), "", withPreamble, 0); err == nil {
		free = unresolved(pf)
	}
	own := imported(f)
	var imports []string
	for _, name := range sortedKeys(importPaths) {
		if free[name] && !own[name] {
			imports = append(imports, fmt.Sprintf("%s %q", name, importPaths[name]))
		}
	}
	return assemble(pkg, src, imports, preamble, genPath)
}

// assemble returns the file of package pkg whose body, after its package
// clause, is src, with the imports given before it and the declarations
// after, and the lines after the block's code given back to genPath.
func assemble(pkg, src string, imports, preamble []string, genPath string) []byte {
	var out strings.Builder
	fmt.Fprintf(&out, "package %s\n\n", pkg)
	if len(imports) > 0 {
		out.WriteString("import (\n\t" + strings.Join(imports, "\n\t") + "\n)\n\n")
	}
	_, rest, _ := strings.Cut(src, "\n")
	out.WriteString(rest)
	for _, p := range preamble {
		out.WriteString(p + "\n")
	}
	file := out.String()
	i := strings.Index(file, resetDirective)
	if i < 0 {
		return []byte(file)
	}
	line := strings.Count(file[:i], "\n") + 2 // the line after the directive's
	return []byte(file[:i] + fmt.Sprintf("//line %s:%d:1", genPath, line) + file[i+len(resetDirective):])
}

// hasPackageClause reports whether code starts, after comments, with a
// package clause: a whole file, compiled as it is.
func hasPackageClause(code string) bool {
	var s scanner.Scanner
	fset := token.NewFileSet()
	s.Init(fset.AddFile("", -1, len(code)), []byte(code), nil, 0)
	_, tok, _ := s.Scan()
	return tok == token.PACKAGE
}

// declarationLines reports, for each of the n lines of code, whether it
// belongs to a declaration that must stay at file level: an import, a
// function or method, a type. Every line of a block that is a list of
// declarations (one that parses as a file's body) does; var and const
// declarations among statements stay with them, as they may use what the
// statements declared.
func declarationLines(code string, n int) []bool {
	decl := make([]bool, n)
	if _, err := parser.ParseFile(token.NewFileSet(), "", "package p;"+code, 0); err == nil {
		for i := range decl {
			decl[i] = true
		}
		return decl
	}
	type tok struct {
		tok  token.Token
		line int
	}
	var toks []tok
	var s scanner.Scanner
	fset := token.NewFileSet()
	file := fset.AddFile("", -1, len(code))
	s.Init(file, []byte(code), nil, 0)
	for {
		pos, t, _ := s.Scan()
		if t == token.EOF {
			break
		}
		toks = append(toks, tok{t, file.Line(pos)})
	}
	// startsDeclaration reports whether the statement that starts at
	// toks[i] is a declaration that must stay at file level.
	startsDeclaration := func(i int) bool {
		switch toks[i].tok {
		case token.IMPORT, token.TYPE:
			return true
		case token.FUNC:
			if i+1 < len(toks) && toks[i+1].tok == token.IDENT {
				return true // func name(...)
			}
			// func (recv T) name(...), unlike a function literal.
			depth := 0
			for j := i + 1; j < len(toks); j++ {
				switch toks[j].tok {
				case token.LPAREN:
					depth++
				case token.RPAREN:
					depth--
				}
				if depth == 0 {
					return j+2 < len(toks) && toks[j+1].tok == token.IDENT && toks[j+2].tok == token.LPAREN
				}
			}
		}
		return false
	}
	depth, start, inDecl := 0, true, false
	for i, t := range toks {
		if start && depth == 0 {
			inDecl = startsDeclaration(i)
		}
		start = false
		if inDecl && t.line-1 < n {
			decl[t.line-1] = true
		}
		switch t.tok {
		case token.LPAREN, token.LBRACK, token.LBRACE:
			depth++
		case token.RPAREN, token.RBRACK, token.RBRACE:
			depth--
		case token.SEMICOLON:
			if depth == 0 {
				start = true
			}
		}
	}
	return decl
}

// imported returns the names that file f's imports bind.
func imported(f *ast.File) map[string]bool {
	names := map[string]bool{}
	for _, spec := range f.Imports {
		if spec.Name != nil {
			names[spec.Name.Name] = true
			continue
		}
		path := strings.Trim(spec.Path.Value, `"`)
		for name, p := range importPaths {
			if p == path {
				names[name] = true
			}
		}
		elems := strings.Split(path, "/")
		last := elems[len(elems)-1]
		if len(elems) > 1 && len(last) > 1 && last[0] == 'v' && strings.Trim(last[1:], "0123456789") == "" {
			last = elems[len(elems)-2] // a major version's suffix
		}
		names[last] = true
	}
	return names
}

// A change replaces the source between two positions with text on the
// same line, so that no line moves.
type change struct {
	pos, end token.Pos
	text     string
}

// apply returns src, parsed into fset, with the changes made.
func apply(src string, fset *token.FileSet, changes []change) string {
	slices.SortStableFunc(changes, func(a, b change) int { return int(b.pos - a.pos) })
	for _, c := range changes {
		from, to := fset.Position(c.pos).Offset, fset.Position(c.end).Offset
		src = src[:from] + c.text + src[to:]
	}
	return src
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
