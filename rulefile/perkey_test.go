package rulefile

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/slidegate/slidegate"
)

func TestParseReadsPerKeyRulesAndOverrides(t *testing.T) {
	want := slidegate.FlowRule{Resource: "GET /api", Limit: 5, PerKey: true, Overrides: map[string]int64{"tenant-a": 500, "abuser": 0}}
	for name, data := range map[string]string{
		"r.yaml": "flow:\n  - resource: GET /api\n    limit: 5\n    per_key: true\n    overrides:\n      tenant-a: 500\n      \"abuser\": 0\n",
		"r.json": `{"flow":[{"resource":"GET /api","limit":5,"per_key":true,"overrides":{"tenant-a":500,"abuser":0}}]}`,
	} {
		r, err := Parse(name, []byte(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(r.Flow) != 1 || !reflect.DeepEqual(r.Flow[0], want) {
			t.Fatalf("%s: %+v, want %+v", name, r.Flow, want)
		}
	}
}

func TestParseReportsBadOverridesOnTheirLines(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		line       int
		says       string
	}{
		{"r.yaml", "flow:\n  - resource: a\n    limit: 5\n    per_key: true\n    overrides: {a: x}\n", 5, "whole number"},
		{"r.yaml", "flow:\n  - resource: a\n    limit: 5\n    per_key: true\n    overrides: [1, 2]\n", 5, "a list is not a group of keys"},
		{"r.yaml", "flow:\n  - resource: a\n    limit: 5\n    per_key: true\n    overrides: {a: -1}\n", 5, "must be between 0"},
		{"r.yaml", "flow:\n  - resource: a\n    limit: 5\n    overrides: {a: 1}\n", 4, "only a per-key rule"},
		{"r.json", `{"flow":[{"resource":"a","limit":5,"per_key":true,"overrides":{"a":"7"}}]}`, 1, "whole number"},
	} {
		_, err := Parse(tc.name, []byte(tc.data))
		var re *slidegate.RulesError
		if !errors.As(err, &re) || len(re.Problems) != 1 {
			t.Fatalf("%q: %v, want one problem", tc.data, err)
		}
		p := re.Problems[0]
		if p.Field != "overrides" || p.Line != tc.line || !strings.Contains(p.Reason, tc.says) || strings.Contains(p.Reason, "\n") {
			t.Errorf("%q: problem %+v, want overrides on line %d saying %q, on one line", tc.data, p, tc.line, tc.says)
		}
	}
}
