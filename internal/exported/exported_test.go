package exported

import "testing"

func TestRuleNamesNeverMeetAGivenName(t *testing.T) {
	var n RuleNames
	for _, c := range []struct{ resource, name, want string }{
		{"r\uFFFD", "qps", "qps"}, {"r\uFFFD", "qps#2", "qps#2"}, {"r\uFFFD", "qps", "qps#3"}, {"s", "qps", "qps"},
	} {
		if got := n.Of(c.resource, c.name); got != c.want {
			t.Errorf("Of(%q, %q) = %q, want %q", c.resource, c.name, got, c.want)
		}
	}
	if Value("r\xff") != "r\uFFFD" || Value("ok") != "ok" {
		t.Errorf("Value: %q, %q", Value("r\xff"), Value("ok"))
	}
}
