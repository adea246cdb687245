package flow

import (
	"strings"
	"testing"
)

// Every reason has a code of its own in snake_case, which metrics use as a
// label value; NotBlocked and unknown reasons have none.
func TestReasonCodesAreDistinctSnakeCase(t *testing.T) {
	seen := map[string]bool{}
	for r := Reason(1); r < numReasons; r++ {
		c := r.Code()
		if c == "" || c != strings.ToLower(c) || strings.ContainsAny(c, " -") || seen[c] {
			t.Errorf("%v: code %q", r, c)
		}
		seen[c] = true
	}
	if NotBlocked.Code() != "" || Reason(numReasons).Code() != "" {
		t.Errorf("NotBlocked's code %q, an unknown reason's %q; want none", NotBlocked.Code(), Reason(numReasons).Code())
	}
	if RefLimited.Code() != "ref_limited" || RateLimited.Code() != "rate_limited" {
		t.Errorf("codes %q, %q: the metrics' label values changed", RefLimited.Code(), RateLimited.Code())
	}
}
