package rulefile

import (
	"strings"
	"testing"
)

func TestParseReadsShadowRulesAndTheGuardWideSwitch(t *testing.T) {
	for name, text := range map[string]string{
		"r.yaml": "shadow: true\nflow:\n  - resource: a\n    limit: 5\n    shadow: true\nbreakers:\n  - resource: b\n    strategy: sre\n    shadow: true\n",
		"r.json": `{"shadow": true, "flow": [{"resource": "a", "limit": 5, "shadow": true}], "breakers": [{"resource": "b", "strategy": "sre", "shadow": true}]}`,
	} {
		r, err := Parse(name, []byte(text))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !r.Shadow || !r.Flow[0].Shadow || !r.Breakers[0].Shadow {
			t.Errorf("%s: read %+v, want every shadow true", name, r)
		}
	}
}

func TestParseReportsABadShadowOnItsLine(t *testing.T) {
	_, err := Parse("r.yaml", []byte("flow: []\nshadow: yes please\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2: shadow") || !strings.Contains(err.Error(), "true or false") {
		t.Fatalf("shadow: yes please: %v, want a problem on line 2 asking for true or false", err)
	}
}

// A file cut short after its first line, a setting, clears no rules.
func TestAFileOfSettingsAloneIsNoRules(t *testing.T) {
	for name, text := range map[string]string{"r.yaml": "shadow: true\n", "r.json": `{"shadow": false}`} {
		if _, err := Parse(name, []byte(text)); err == nil || !strings.Contains(err.Error(), "no rules") {
			t.Errorf("%s %q: %v, want a problem saying it has no rules", name, text, err)
		}
	}
}
