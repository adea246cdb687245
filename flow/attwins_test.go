package flow

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// The package's rule for time: an exported method that reads the
// limiter's clock has a twin named ...At that takes the time instead, and
// only a method named ...At takes a time. The source is the reference:
// a method reads the clock when its body calls clock.Now.
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
	if len(methods) < 40 {
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

// The twins added for the rule decide at the time they are given, and
// their plain forms at the limiter's clock.
func TestTheAtTwinsDecideAtTheTimeGiven(t *testing.T) {
	c := clock.NewManual(0)
	hour, sec := int64(time.Hour), int64(time.Second)

	q, err := NewKeyedQPS(KeyedQPSSettings{Windows: []KeyWindow{{Limit: 1, Interval: time.Second}}, Clock: c})
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := q.AllowAt(hour, "k"); !d.Allowed {
		t.Fatalf("KeyedQPS.AllowAt(1h) of a new key: %+v", d)
	}
	if d, j := q.AllowAt(hour, "k"); d.Allowed || j != 0 || d.RetryAfter <= 0 {
		t.Fatalf("KeyedQPS.AllowAt(1h) again: %+v, window %d, want refused by window 0", d, j)
	}
	if d, _ := q.AllowAt(hour+2*sec, "k"); !d.Allowed {
		t.Fatalf("KeyedQPS.AllowAt(1h+2s): %+v", d)
	}
	c.Set(hour + 2*sec)
	if got, want := len(q.topAt(c.Now(), 10, false)), len(q.topAt(hour+2*sec, 10, false)); got != want || got != 1 {
		t.Fatalf("Top shows %d keys, TopAt at the clock's time %d, want 1", got, want)
	}

	th := mustKeyedThrottle(t, 1, time.Second, 0, nil, 0, c)
	if d := th.AllowAt(0, "k"); !d.Allowed {
		t.Fatalf("KeyedThrottle.AllowAt(0): %+v", d)
	}
	if d := th.AllowAt(0, "k"); d.Reason != RateLimited || d.RetryAfter != time.Second {
		t.Fatalf("KeyedThrottle.AllowAt(0) again: %+v, want rate limited, retry after 1s", d)
	}
	if err := th.WaitAt(context.Background(), sec, "k"); err != nil {
		t.Fatalf("KeyedThrottle.WaitAt(1s): %v", err)
	}
	if err := th.WaitAt(context.Background(), sec, "k"); err == nil {
		t.Fatal("KeyedThrottle.WaitAt(1s) again was let through with no wait allowed")
	}

	cpu := new(cpuAt)
	cpu.set(1)
	s, err := NewShedder(ShedderSettings{CPU: cpu.read, Clock: c})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.stateAt(0).Limit; got != math.MaxInt64 {
		t.Fatalf("the bound before any request completed = %d, want none", got)
	}
	for range 10 {
		var p Permit
		s.AcquireAt(0, &p, "")
		p.DoneAt(int64(time.Millisecond), Succeeded)
	}
	if st := s.stateAt(sec); st.Limit == math.MaxInt64 || !st.Shedding {
		t.Fatalf("the shedder's state at 1s = %+v: want a bound learnt, and shedding at 100%% CPU", st)
	}
}
