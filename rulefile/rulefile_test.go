package rulefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
)

const goodYAML = `
flow:
  - resource: GET /orders
    limit: 100
    interval: 1s
  - resource: GET /orders
    type: concurrency
    limit: 20
breakers:
  - resource: mysql
    strategy: error_ratio
    threshold: 0.5
    open_timeout: 5s
    min_requests: 0
`

func TestParseReadsYAMLAndJSON(t *testing.T) {
	r, err := Parse("rules.yaml", []byte(goodYAML))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Flow) != 2 || r.Flow[0].Interval != slidegate.Duration(time.Second) || r.Breakers[0].OpenTimeout != slidegate.Duration(5*time.Second) ||
		r.Breakers[0].MinRequests == nil || *r.Breakers[0].MinRequests != 0 {
		t.Fatalf("rules = %+v", r)
	}
	j, err := Parse("rules.json", []byte(`{"flow":[{"resource":"a","limit":5,"max_wait":"250ms","behavior":"throttle"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if j.Flow[0].MaxWait != slidegate.Duration(250*time.Millisecond) {
		t.Fatalf("rules = %+v", j)
	}
}

func TestParseReportsEveryProblemWithItsPlace(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       []string
	}{
		{"r.yaml", "flow:\n  - resource: a\n    limit: x\n    intervl: 1s\n", []string{"line 3: cannot unmarshal !!str `x` into int64", "line 4: field intervl not found"}},
		{"r.yaml", "flow:\n  - resource: a\n    interval: 500\n", []string{`duration "500"`}},
		{"r.yaml", "flow:\n  - resource: a\n    limit: -1\n  - resource: b\n    behavior: queue\n",
			[]string{`flow[0] (resource "a"): limit: -1 must not be negative`, `flow[1] (resource "b"): behavior: "queue"`}},
		{"r.yaml", "breakers:\n  - resource: db\n    strategy: sometimes\n", []string{`strategy: "sometimes" is not one of`}},
		{"r.yaml", "flow: [", []string{"line 1"}},
		{"r.json", `{"flow":[{"resource":"a","limt":1}]}`, []string{`unknown field "limt"`}},
		{"r.json", "{\n\"flow\": [\n}", []string{"line 3"}},
		{"r.json", `{"flow":[{"resource":"a","interval":500}]}`, []string{`duration 500`}},
		{"r.json", `{} {}`, []string{"data after the rules"}},
	} {
		_, err := Parse(tc.name, []byte(tc.data))
		var re *slidegate.RulesError
		if !errors.As(err, &re) || re.Source != tc.name {
			t.Fatalf("%q: %v, want a *RulesError from %s", tc.data, err, tc.name)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: no problem mentions %q:\n%v", tc.data, w, err)
			}
		}
	}
}

func TestApplyKeepsTheRulesInForceWhenTheFileIsBad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	g := slidegate.New()
	write(t, path, goodYAML)
	if err := Apply(g, path); err != nil {
		t.Fatal(err)
	}
	write(t, path, "flow:\n  - resource: a\n    limit: -5\n")
	if err := Apply(g, path); err == nil {
		t.Fatal("a bad file was applied")
	}
	if n := len(g.Rules().Flow); n != 2 {
		t.Fatalf("%d flow rules in force, want the 2 of the good file", n)
	}
	if err := Apply(g, filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestWatcherReloadsAndKeepsTheRulesWhenTheFileIsBad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	write(t, path, goodYAML)
	g := slidegate.New()
	reloads := make(chan error, 100)
	w, err := Watch(g, path, OnReload(func(err error) { reloads <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	next := func() error {
		t.Helper()
		select {
		case err := <-reloads:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("no reload within 10 s of a change")
			return nil
		}
	}
	// A bad file: refused, the rules in force stay.
	write(t, path, "flow:\n  - resource: a\n    limit: -5\n")
	for err := next(); err == nil; err = next() {
		// a write may be seen as several events; wait for the refusal
	}
	if n := len(g.Rules().Flow); n != 2 {
		t.Fatalf("%d flow rules in force after a bad file, want 2", n)
	}
	// A good file replacing it by rename, as editors do.
	tmp := filepath.Join(dir, "rules.yaml.tmp")
	write(t, tmp, "flow:\n  - resource: a\n    limit: 7\n")
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	for err := next(); err != nil || len(g.Rules().Flow) != 1; err = next() {
	}
	if got := g.Rules().Flow[0].Limit; got != 7 {
		t.Fatalf("limit = %d, want 7", got)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestWatchRefusesABadFileAtOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	write(t, path, "flow: [")
	if _, err := Watch(slidegate.New(), path); err == nil {
		t.Fatal("Watch accepted a bad file")
	}
}

func FuzzParse(f *testing.F) {
	f.Add("rules.yaml", []byte(goodYAML))
	f.Add("rules.json", []byte(`{"flow":[{"resource":"a","limit":1,"interval":"1s"}]}`))
	f.Add("rules.yaml", []byte("breakers:\n  - resource: db\n    strategy: adaptive\n    k: 1.5\n"))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		r, err := Parse(name, data)
		if err == nil {
			if verr := r.Validate(); verr != nil {
				t.Fatalf("Parse accepted rules that do not validate: %v", verr)
			}
		}
	})
}

func TestAnEmptyFileIsRefused(t *testing.T) {
	for _, data := range []string{"", "  \n\t\n"} {
		for _, name := range []string{"rules.yaml", "rules.json"} {
			_, err := Parse(name, []byte(data))
			var re *slidegate.RulesError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), "the file is empty") {
				t.Errorf("Parse(%s, %q) = %v, want the file refused as empty", name, data, err)
			}
		}
	}
	for name, data := range map[string]string{"rules.yaml": "flow: []\n", "rules.json": "{}"} {
		if r, err := Parse(name, []byte(data)); err != nil || len(r.Flow)+len(r.Breakers) != 0 {
			t.Errorf("Parse(%s, %q) = %+v, %v; want no rules", name, data, r, err)
		}
	}
}
