package compare

import (
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/flowlimits"
)

// TestKeyMemory runs the per-key memory measurement of cmd/keytable on
// fewer keys. The heap figures depend on the machine and the libraries, so
// only their sanity is checked; what each limiter remembers does not:
// slidegate counts every key (none of the probed keys is allowed its whole
// limit again within the interval), sentinel exactly as many as its hotspot
// caches hold for a 1 s rule, the most recent.
func TestKeyMemory(t *testing.T) {
	const keys = 20_000
	rows, err := MeasureKeyMemory(keys, KeyLimit, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2 (slidegate, sentinel)", len(rows))
	}
	sg, sen := rows[0], rows[1]
	for _, r := range rows {
		if r.Keys != keys || r.Bytes <= 0 || r.PerKey <= 0 || r.Note == "" {
			t.Errorf("%s: nothing measured: %+v", r.Library, r)
		}
	}
	if sg.Remembered != keys || sg.Probed != keyProbes {
		t.Errorf("%s: remembers %d keys (%d probed), want all %d (%d probed)", sg.Library, sg.Remembered, sg.Probed, keys, keyProbes)
	}
	if sg.Bytes > flowlimits.DefaultKeyMemory {
		t.Errorf("%s: %d bytes, above the guard's budget for per-key state %d", sg.Library, sg.Bytes, flowlimits.DefaultKeyMemory)
	}
	if want := hotspotCapacity(KeyInterval); sen.Remembered != want {
		t.Errorf("%s: remembers %d keys, want its caches' capacity %d", sen.Library, sen.Remembered, want)
	}
	var b strings.Builder
	if err := WriteKeyMemory(&b, rows); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), "\n"); n != 2+len(rows) {
		t.Errorf("table of %d lines, want %d:\n%s", n, 2+len(rows), b.String())
	}
	t.Log("\n" + b.String())
}
