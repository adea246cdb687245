package rulefile

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
)

// overloadYAML and overloadJSON are the same rules: a shed rule protecting
// the whole service, with no limit (it has none), and an adaptive rule on
// one resource with every field it takes.
const overloadYAML = `
flow:
  - resource: (inbound)
    type: shed
    cpu_threshold: 0.8
    interval: 10s
    buckets: 100
  - resource: GET /api/search
    type: adaptive
    limit: 20
    algorithm: aimd
    min_limit: 4
    max_limit: 200
    tolerance: 2
  - resource: GET /api/orders
    type: adaptive
`

const overloadJSON = `{"flow": [
  {"resource": "(inbound)", "type": "shed", "cpu_threshold": 0.8, "interval": "10s", "buckets": 100},
  {"resource": "GET /api/search", "type": "adaptive", "limit": 20, "algorithm": "aimd",
   "min_limit": 4, "max_limit": 200, "tolerance": 2},
  {"resource": "GET /api/orders", "type": "adaptive"}
]}`

var overloadRules = slidegate.Rules{Flow: []slidegate.FlowRule{
	{Resource: slidegate.InboundResource, Type: slidegate.ShedRule, CPUThreshold: 0.8,
		Interval: slidegate.Duration(10 * time.Second), Buckets: 100},
	{Resource: "GET /api/search", Type: slidegate.AdaptiveRule, Limit: 20, Algorithm: "aimd",
		MinLimit: 4, MaxLimit: 200, Tolerance: 2},
	{Resource: "GET /api/orders", Type: slidegate.AdaptiveRule},
}}

func TestParseReadsShedAndAdaptiveRules(t *testing.T) {
	for name, data := range map[string]string{"rules.yaml": overloadYAML, "rules.json": overloadJSON} {
		r, err := Parse(name, []byte(data))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !reflect.DeepEqual(r, overloadRules) {
			t.Errorf("%s:\n got %+v\nwant %+v", name, r, overloadRules)
		}
	}
}

// A shed rule has no limit, and an adaptive rule's is where it starts: a
// file leaves them out. Only the kinds whose limit 0 blocks everything
// must write it.
func TestShedAndAdaptiveRulesNeedNoLimit(t *testing.T) {
	for _, typ := range []string{"shed", "adaptive"} {
		data := "flow:\n  - resource: (inbound)\n    type: " + typ + "\n"
		if _, err := Parse("rules.yaml", []byte(data)); err != nil {
			t.Errorf("a %s rule without a limit: %v", typ, err)
		}
	}
	for _, typ := range []string{"qps", "throttle", "concurrency"} {
		data := "flow:\n  - resource: a\n    type: " + typ + "\n"
		_, err := Parse("rules.yaml", []byte(data))
		var re *slidegate.RulesError
		if !errors.As(err, &re) || len(re.Problems) != 1 || re.Problems[0].Field != "limit" || !strings.Contains(re.Problems[0].Reason, "missing") {
			t.Errorf("a %s rule without a limit: %v, want its limit reported missing", typ, err)
		}
	}
}

func TestParseReportsBadOverloadFieldsOnTheirLines(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       []want
	}{
		{"r.yaml", "flow:\n  - resource: (inbound)\n    type: shed\n    cpu_threshold: 1.5\n  - resource: a\n    type: adaptive\n    algorithm: vegas\n    min_limit: -2\n    tolerance: high\n", []want{
			{4, "flow[0]", "cpu_threshold", "1.5 must be above 0 and at most 1"},
			{7, "flow[1]", "algorithm", `"vegas" is not "gradient" or "aimd"`},
			{8, "flow[1]", "min_limit", "-2 must not be negative"},
			{9, "flow[1]", "tolerance", `"high" is not a number`},
		}},
		// Fields of one kind given to another.
		{"r.yaml", "flow:\n  - resource: a\n    limit: 10\n    cpu_threshold: 0.9\n  - resource: b\n    type: shed\n    limit: 5\n    tolerance: 2\n", []want{
			{4, "flow[0]", "cpu_threshold", "does not apply to a qps rule"},
			{7, "flow[1]", "limit", "does not apply to a shed rule"},
			{8, "flow[1]", "tolerance", "does not apply to a shed rule"},
		}},
		// The rules of (inbound) are neither per key nor a reference.
		{"r.yaml", "flow:\n  - resource: (inbound)\n    limit: 10\n    per_key: true\n  - resource: a\n    limit: 1\n    ref_resource: (inbound)\n", []want{
			{2, "flow[0]", "resource", "neither per key nor cluster-wide"},
			{7, "flow[1]", "ref_resource", "all the inbound traffic"},
		}},
		{"r.json", "{\"flow\": [\n {\"resource\": \"(inbound)\", \"type\": \"shed\", \"cpu_threshold\": \"high\"},\n {\"resource\": \"a\", \"type\": \"adaptive\",\n  \"max_limit\": 1.5}]}", []want{
			{2, "flow[0]", "cpu_threshold", `"high" is not a number`},
			{4, "flow[1]", "max_limit", "1.5 is not a whole number"},
		}},
	} {
		_, err := Parse(tc.name, []byte(tc.data))
		var re *slidegate.RulesError
		if !errors.As(err, &re) {
			t.Errorf("%s %q: %v, want a *RulesError", tc.name, tc.data, err)
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
	}
}
