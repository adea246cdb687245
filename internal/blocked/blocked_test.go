package blocked

import (
	"errors"
	"fmt"
	"testing"
)

func TestAPackagesRefusalMatchesTheOneSentinel(t *testing.T) {
	own := Sentinel("breaker")
	err := fmt.Errorf("%w: half-open, every probe place taken", own)
	if !errors.Is(err, Err) || !errors.Is(err, own) {
		t.Errorf("%v matches Err %v and its own sentinel %v; want both", err, errors.Is(err, Err), errors.Is(err, own))
	}
	if errors.Is(Err, own) {
		t.Error("Err matches a package's own sentinel: a flow refusal would read as a breaker's")
	}
	if own.Error() != "breaker: blocked" {
		t.Errorf("message %q", own.Error())
	}
}
