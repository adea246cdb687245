package flow

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"testing"
)

// A limiter's settings hold only what it takes: a setting that another
// limiter takes does not compile with it, where an option shared by all
// the constructors was refused only when the program ran. Each snippet
// below gives a limiter a setting it does not take; the type checker must
// refuse every one, and accept the same call without it. (The settings
// per key of a Concurrency or a Throttle made not per key are refused when
// it is made: TestNoSettingIsSilentlyIgnored.)
func TestASettingALimiterDoesNotTakeDoesNotCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the package from source")
	}
	wrong := map[string]string{
		"a shedder's warm-up":                 `flow.NewShedder(flow.ShedderSettings{WarmUp: time.Second})`,
		"an adaptive limit's buckets":         `flow.NewAdaptive(flow.AdaptiveSettings{Buckets: 10})`,
		"a retry budget's warm-up":            `flow.NewRetryBudget(flow.RetryBudgetSettings{WarmUp: time.Minute})`,
		"a keyed QPS limiter's warm-up":       `flow.NewKeyedQPS(flow.KeyedQPSSettings{WarmUp: time.Minute})`,
		"a concurrency limit's clock":         `flow.NewConcurrency(flow.ConcurrencySettings{PerKey: true, Clock: nil})`,
		"a concurrency limit's interval":      `flow.NewConcurrency(flow.ConcurrencySettings{Interval: time.Second})`,
		"a throttle's windows":                `flow.NewThrottle(flow.ThrottleSettings{Limit: 1, Interval: time.Second, Windows: nil})`,
		"a QPS limiter's key memory":          `flow.NewQPS(flow.QPSSettings{Limit: 1, Interval: time.Second, KeyMemory: nil})`,
		"a shedder given an option":           `flow.NewShedder(flow.ShedderSettings{}, nil)`,
		"a QPS limiter given its limit alone": `flow.NewQPS(100, time.Second)`,
	}
	right := `flow.NewShedder(flow.ShedderSettings{Interval: time.Second, Clock: nil})`
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "source", nil)
	check := func(call string) error {
		src := "package p\nimport (\n\t\"time\"\n\t\"github.com/slidegate/slidegate/flow\"\n)\nvar _ = time.Second\nfunc f() { " + call + " }\n"
		f, err := parser.ParseFile(fset, "p.go", src, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = (&types.Config{Importer: imp}).Check("p", fset, []*ast.File{f}, nil)
		return err
	}
	if err := check(right); err != nil {
		t.Fatalf("%s does not compile: %v", right, err)
	}
	for name, call := range wrong {
		if check(call) == nil {
			t.Errorf("%s compiles: %s", name, call)
		}
	}
}
