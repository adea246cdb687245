package rulefile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
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
	j, err := Parse("rules.json", []byte(`{"flow":[{"resource":"a","limit":5,"max_wait":"250ms","type":"throttle"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if j.Flow[0].MaxWait != slidegate.Duration(250*time.Millisecond) {
		t.Fatalf("rules = %+v", j)
	}
}

// want is a problem a test expects: its line, rule and field exactly, and
// words its reason contains.
type want struct {
	line        int
	rule, field string
	reason      string
}

// badFiles are files with problems and every problem each must report, in
// order, with its place.
var badFiles = []struct {
	name, data string
	want       []want
}{
	// One of each kind of problem in one file: none hides another.
	{"r.yaml", "flow:\n  - resource: a\n    limt: 10\n  - resource: b\n    limit: ten\n    interval: 5\n  - resource: c\n    limit: -1\n    type: queue\n", []want{
		{3, "flow[0]", "", `unknown field "limt" (did you mean "limit"?)`},
		{5, "flow[1]", "limit", `"ten" is not a whole number`},
		{6, "flow[1]", "interval", "5 has no unit: write it as 500ms, 2s or 1m30s"},
		{8, "flow[2]", "limit", "-1 must not be negative"},
		{9, "flow[2]", "type", `"queue" is not "qps", "throttle", "concurrency", "shed" or "adaptive"`},
	}},
	{"r.yaml", "breakers:\n  - resource: db\n    strategy: error_ratio\n    threshold: high\n    min_requests: 1.5\n    open_timeout: 5 seconds\n    max_open_timeout: 1s\n    k: 2\n", []want{
		{4, "breakers[0]", "threshold", `"high" is not a number`},
		{5, "breakers[0]", "min_requests", "1.5 is not a whole number"},
		{6, "breakers[0]", "open_timeout", `"5 seconds" is not a duration: write it as 500ms, 2s or 1m30s`},
		{8, "breakers[0]", "k", "applies to an SRE breaker only"},
	}},
	// Syntax: the line a user must look at, in a user's words.
	{"r.yaml", "flow:\n  - resource: a\n    limit: 10\n   interval: 1s\n", []want{{4, "", "", "the indentation does not line up"}}},
	{"r.yaml", "flow:\n- resource: a\n  limit: 1\n- resource: b\n limit: 2\n", []want{{5, "", "", "the indentation does not line up"}}},
	{"r.yaml", "flow:\n  - resource: a\n\tlimit: 10\n", []want{{3, "", "", "a tab in the indentation"}}},
	{"r.yaml", "flow:\n  - resource: a\n    limit: 10\n  - resource: [b\n", []want{{4, "", "", "a list in [ ] is not closed"}}},
	{"r.yaml", "flow:\n  - resource: a: b\n    limit: 1\n", []want{{2, "", "", `does a value hold ": "`}}},
	{"r.yaml", "flow:\n  - resource: \"a\n    limit: 1\n", []want{{2, "", "", "is a closing quote missing?"}}},
	{"r.yaml", "flow:\n  - resource: a\n    limit: *ten\n", []want{{3, "", "", "*ten refers to no anchor"}}},
	// The file as a whole.
	{"r.yaml", "", []want{{0, "", "", "the file is empty; to clear the rules, write flow: []"}}},
	{"r.yaml", "# the rules of orders\n", []want{{0, "", "", "only comments"}}},
	{"r.yaml", "flow:\n  - resource: a\n    limit: 10\n---\nflow:\n  - resource: b\n    limit: 5\n", []want{{4, "", "", "a second document starts here"}}},
	{"r.yaml", "flow:\n", []want{{1, "", "flow", "no rules under it: write flow: [] for none"}}},
	{"r.yaml", "flow: 5\n", []want{{1, "", "flow", "5 is not a list of rules"}}},
	{"r.yaml", "- resource: a\n  limit: 1\n", []want{{1, "", "", "the file holds a list, not rules"}}},
	{"r.yaml", "flwo:\n  - resource: a\n", []want{{1, "", "", `unknown field "flwo" (did you mean "flow"?)`}}},
	{"r.yaml", "flow: []\nresource: a\n", []want{{2, "", "", `unknown field "resource": a rule's fields go in a rule`}}},
	{"r.yaml", "flow: []\nflow: []\n", []want{{2, "", "flow", "given again (first on line 1)"}}},
	// Rules and fields.
	{"r.yaml", "flow:\n  - resource: a\n    limit: 1\n  - GET /b\n", []want{{4, "flow[1]", "", `"GET /b" is not a flow rule`}}},
	{"r.yaml", "flow:\n  - resource: a\n    limit: 1\n    limit: 2\n", []want{{4, "flow[0]", "limit", "given again (first on line 3)"}}},
	{"r.yaml", "flow:\n  - resource: a\n    limit:\n", []want{{3, "flow[0]", "limit", "no value"}}},
	{"r.yaml", "flow:\n  - resource: a\n    limit: \"10\"\n", []want{{3, "flow[0]", "limit", `"10" is text in quotes, not a whole number: write 10 without quotes`}}},
	{"r.yaml", "flow:\n  - resource: a\n    limit: 99999999999999999999\n", []want{{3, "flow[0]", "limit", "out of range"}}},
	{"r.yaml", "flow:\n  - resource: a\n    limit: 1\n    cluster: maybe\n    cold_factor: [1]\n", []want{
		{4, "flow[0]", "cluster", `"maybe" is not true or false`},
		{5, "flow[0]", "cold_factor", "a list is not a number"}}},
	{"r.yaml", "flow:\n  - resource: a\n    limit: 1\n    strategy: adaptive\n", []want{{4, "flow[0]", "", `unknown field "strategy": that is a breaker's field, and this is a flow rule`}}},
	{"r.yaml", "flow:\n  - resource: a\n    maxWait: 1s\n    limit: 1\n", []want{{3, "flow[0]", "", `(did you mean "max_wait"?)`}}},
	// A rule cut short after its first line.
	{"r.yaml", "flow:\n  - resource: a\n    limit: 100\n  - resource: b\n", []want{{4, "flow[1]", "limit", "missing: write limit: 0 to block every request"}}},
	{"r.yaml", "breakers:\n  - resource: db\n", []want{{2, "breakers[0]", "strategy", "missing: one of sre"}}},
	// The Google SRE throttle was spelt "adaptive", the word of the adaptive
	// concurrency limit: the old spelling is refused, naming the new one.
	{"r.yaml", "breakers:\n  - resource: db\n    strategy: adaptive\n    k: 1.5\n", []want{{3, "breakers[0]", "strategy", `"adaptive" is now spelt "sre"`}}},
	// Validation problems of fields the file leaves out are on the rule's line.
	{"r.yaml", "flow:\n  - resource: a\n    limit: 1\n  - resource: b\n    limit: 1\n    lease: 5\n", []want{{6, "flow[1]", "lease", "only a cluster rule leases"}}},
	// JSON.
	{"r.json", "", []want{{0, "", "", "the file is empty; to clear the rules, write {}"}}},
	{"r.json", "{\"flow\":[{\"resource\":\"a\",\"limt\":1},\n {\"resource\":\"b\",\"limit\":\"ten\"},\n {\"resource\":5,\"limit\":1}]}", []want{
		{1, "flow[0]", "", `unknown field "limt" (did you mean "limit"?)`},
		{2, "flow[1]", "limit", `"ten" is not a whole number`},
		{3, "flow[2]", "resource", "5 is not text: put it in double quotes"}}},
	{"r.json", "{\n\"flow\": [\n}", []want{{3, "", "", "a value is missing"}}},
	{"r.json", "{\n  \"flow\": [\n    {\"resource\": \"a\", \"limit\": ten}\n  ]\n}", []want{{3, "", "", "text goes in double quotes"}}},
	{"r.json", "{\"flow\": [{\"resource\": \"a\"\n \"limit\": 1}]}", []want{{2, "", "", "fields must be separated by commas"}}},
	{"r.json", "{\"flow\": [", []want{{1, "", "", "the file ends before the rules do"}}},
	{"r.json", `{"flow":[{"resource":"a","limit":1,"interval":500}]}`, []want{{1, "flow[0]", "interval", "500 has no unit"}}},
	{"r.json", "{}\n{}", []want{{2, "", "", "data after the rules"}}},
	{"r.json", `"",`, []want{{1, "", "", "data after the rules"}}},
	{"r.json", `{"flow": null}`, []want{{1, "", "flow", `no rules under it: write "flow": [] for none`}}},
	{"r.json", "{\"flow\": [{\"resource\": \"a\", \"limit\": 1,\n \"limit\": 2}]}", []want{{2, "flow[0]", "limit", "given again (first on line 1)"}}},
	{"r.json", "{\"flow\": [{\"resource\": \"a\", \"limit\": -1}],\n \"breakers\": [{\"resource\": \"b\", \"strategy\": \"never\"}]}", []want{
		{1, "flow[0]", "limit", "-1 must not be negative"},
		{2, "breakers[0]", "strategy", `"never" is not one of`}}},
}

// jargon is what no message may show: the words of a parser or of Go.
var jargon = []string{"!!", "unmarshal", "int64", "float64", "slidegate.", "struct", "yaml:", "json:", "Go ", "%!"}

func TestParseReportsEveryProblemWithItsLineRuleAndField(t *testing.T) {
	for _, tc := range badFiles {
		_, err := Parse(tc.name, []byte(tc.data))
		var re *slidegate.RulesError
		if !errors.As(err, &re) || re.Source != tc.name {
			t.Errorf("%s %q: %v, want a *RulesError from %s", tc.name, tc.data, err, tc.name)
			continue
		}
		ok := len(re.Problems) == len(tc.want)
		for i := 0; ok && i < len(tc.want); i++ {
			p, w := re.Problems[i], tc.want[i]
			ok = p.Line == w.line && p.Rule == w.rule && p.Field == w.field && strings.Contains(p.Reason, w.reason)
		}
		if !ok {
			t.Errorf("%s %q:\n%v\nwant %+v", tc.name, tc.data, err, tc.want)
		}
		for _, p := range re.Problems {
			for _, j := range jargon {
				if strings.Contains(p.Reason, j) {
					t.Errorf("%s %q: %q speaks of %q", tc.name, tc.data, p.Reason, j)
				}
			}
			if strings.HasPrefix(p.String(), ":") || strings.HasPrefix(p.String(), " ") {
				t.Errorf("%s %q: %q starts with a stray separator", tc.name, tc.data, p)
			}
		}
	}
}

func TestParseFollowsYAMLAnchorsAndMerges(t *testing.T) {
	r, err := Parse("r.yaml", []byte("flow:\n  - &base\n    resource: a\n    limit: 5\n    interval: 2s\n  - <<: *base\n    resource: b\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Flow) != 2 || r.Flow[1].Resource != "b" || r.Flow[1].Limit != 5 || r.Flow[1].Interval != slidegate.Duration(2*time.Second) {
		t.Fatalf("rules = %+v", r)
	}
	// A billion laughs: nine levels of ten merges each stand for 10^9 fields.
	var b strings.Builder
	b.WriteString("flow:\n  - &l0\n    resource: a\n    limit: 1\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&b, "  - &l%d\n    <<: [", i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*l%d", i-1)
		}
		b.WriteString("]\n")
	}
	start := time.Now()
	_, err = Parse("r.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "through aliases and merges") {
		t.Fatalf("a billion merged fields: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("a billion merged fields took %v to refuse", d)
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("rules.yaml", []byte(goodYAML))
	f.Add("rules.json", []byte(`{"flow":[{"resource":"a","limit":1,"interval":"1s"}]}`))
	f.Add("rules.yaml", []byte("breakers:\n  - resource: db\n    strategy: sre\n    k: 1.5\n"))
	for _, tc := range badFiles {
		f.Add(tc.name, []byte(tc.data))
	}
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		r, err := Parse(name, data)
		if err == nil {
			if verr := r.Validate(); verr != nil {
				t.Fatalf("Parse accepted rules that do not validate: %v", verr)
			}
			return
		}
		var re *slidegate.RulesError
		if !errors.As(err, &re) || re.Source != name || len(re.Problems) == 0 {
			t.Fatalf("Parse(%q) = %v, want a *RulesError from it with problems", name, err)
		}
		// Every kind of line break YAML knows, "\r\n" counted twice: more
		// lines than the file has, never fewer.
		lines := 1
		for _, br := range []string{"\n", "\r", "\u0085", "\u2028", "\u2029"} {
			lines += bytes.Count(data, []byte(br))
		}
		for _, p := range re.Problems {
			if p.Reason == "" || p.Line < 0 || p.Line > lines {
				t.Fatalf("problem %+v: no reason, or a line outside the file's %d", p, lines)
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

func TestRuleNamesAreReadAndTheirProblemsHaveLines(t *testing.T) {
	r, err := Parse("rules.yaml", []byte("flow:\n  - resource: a\n    name: burst\n    limit: 5\nbreakers:\n  - resource: a\n    name: db\n    strategy: sre\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Flow[0].Name != "burst" || r.Breakers[0].Name != "db" {
		t.Fatalf("names read: %q, %q", r.Flow[0].Name, r.Breakers[0].Name)
	}
	_, err = Parse("rules.yaml", []byte("flow:\n  - resource: a\n    name: burst\n    limit: 5\nbreakers:\n  - resource: a\n    name: burst\n    strategy: sre\n"))
	var re *slidegate.RulesError
	if !errors.As(err, &re) || len(re.Problems) != 1 || re.Problems[0].Line != 7 || re.Problems[0].Field != "name" {
		t.Fatalf("a name given twice: %v, want one problem of the field name on line 7", err)
	}
}
