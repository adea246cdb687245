package slidegate

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Rules is a guard's complete set of rules: what each resource may do. A
// resource may have any number of flow rules and breakers; a request must
// be allowed by all of them. The zero Rules has no rules.
//
// Rules read from and write to JSON and YAML (the package rulefile reads
// files and watches them), with durations written as "500ms" or "1m30s".
type Rules struct {
	Flow     []FlowRule    `json:"flow,omitempty" yaml:"flow,omitempty"`
	Breakers []BreakerRule `json:"breakers,omitempty" yaml:"breakers,omitempty"`
	// Shadow, if true, puts every rule in shadow (see FlowRule.Shadow):
	// the guard decides and counts, and blocks nothing.
	Shadow bool `json:"shadow,omitempty" yaml:"shadow,omitempty"`
}

// InboundResource names all the inbound traffic of the guard together:
// the requests entered with [WithInbound], as the middleware's server side
// enters them, whatever resource each enters. A flow rule on it holds for
// all of them: a shed rule that protects the whole service, a concurrency
// limit on all it serves. A request that enters an inbound resource is
// asked the rules of InboundResource first, then those of its own
// resource. No breaker names it, and no rule reads it as its RefResource.
// [Guard.Stats] of InboundResource is the inbound traffic's statistics.
const InboundResource = "(inbound)"

// A Duration is a time.Duration that is written as "500ms" or "1m30s" in
// JSON, YAML and text.
type Duration time.Duration

// String returns the duration as time.Duration writes it.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes the duration as "500ms".
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads a duration written as time.ParseDuration reads it.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("duration %q: write it as 500ms, 2s or 1m30s", string(b))
	}
	*d = Duration(v)
	return nil
}

// UnmarshalJSON reads a duration from a JSON string ("500ms"). A bare number
// is refused: its unit would be a guess.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] != '"' {
		return fmt.Errorf("duration %s: write it as a string with a unit, such as \"500ms\"", string(b))
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	return d.UnmarshalText([]byte(s))
}
