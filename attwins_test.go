package slidegate

import (
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/attwins"
)

// The package's rule for time (see internal/attwins): an exported method
// that reads the clock has a twin named ...At that takes the time instead,
// and only a method named ...At takes a time.
func TestEveryMethodThatReadsTheClockHasAnAtTwin(t *testing.T) {
	breaches, methods, err := attwins.Check(".")
	if err != nil {
		t.Fatal(err)
	}
	if methods < 10 {
		t.Fatalf("found %d exported methods: the test reads the wrong files", methods)
	}
	for _, b := range breaches {
		// SetRules stamps when the rules came in force: it configures,
		// and decides nothing a simulation would replay.
		if !strings.HasPrefix(b, "Guard.SetRules ") {
			t.Error(b)
		}
	}
}
