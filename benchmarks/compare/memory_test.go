package compare

import (
	"math"
	"strings"
	"testing"
)

// TestMemory runs the memory table's measurements on a few resources (the
// figures of cmd/memtable depend on the machine and on the library as it is,
// so only their sanity is checked): every library that has a figure for a
// configuration gives a positive, finite number of bytes per resource, a
// contended row a finite growth, and the table prints a row per
// configuration and size.
func TestMemory(t *testing.T) {
	o := MemoryOptions{Sizes: []int{50, 100}, Contended: 10, Ops: 200, ContendAll: true}
	tab, err := MeasureMemory(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantRows := 2*len(o.Sizes) + 2 // two configurations at each size, two contended
	if len(tab.Rows) != wantRows {
		t.Fatalf("%d rows, want %d", len(tab.Rows), wantRows)
	}
	for _, r := range tab.Rows {
		if len(r.Cells) != len(tab.Libraries) {
			t.Fatalf("%v, N = %d: %d cells, want one per library (%d)", r.Config, r.N, len(r.Cells), len(tab.Libraries))
		}
		for i, c := range r.Cells {
			where := tab.Libraries[i].Name + ", " + r.Config.label(tab.Goroutines, o.Ops)
			if c.Absent != "" {
				if !math.IsNaN(c.BytesPerResource) {
					t.Errorf("%s: absent (%s) but %v bytes per resource", where, c.Absent, c.BytesPerResource)
				}
				continue
			}
			if !(c.BytesPerResource > 0) || math.IsInf(c.BytesPerResource, 0) {
				t.Errorf("%s, N = %d: %v bytes per resource, want positive and finite", where, r.N, c.BytesPerResource)
			}
			if math.IsNaN(c.Growth) || math.IsInf(c.Growth, 0) {
				t.Errorf("%s, N = %d: growth %v, want finite", where, r.N, c.Growth)
			}
		}
	}
	// slidegate and sentinel measure every configuration.
	for _, r := range tab.Rows {
		for i := range 2 {
			if r.Cells[i].Absent != "" {
				t.Errorf("%s, %v: no figure: %s", tab.Libraries[i].Name, r.Config, r.Cells[i].Absent)
			}
		}
	}

	var b strings.Builder
	if err := tab.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	var tableRows int
	for _, l := range lines {
		if strings.HasPrefix(l, "| a resource") {
			tableRows++
		}
	}
	if tableRows != wantRows {
		t.Errorf("the markdown has %d rows, want %d:\n%s", tableRows, wantRows, b.String())
	}
	t.Log("\n" + b.String())
}

// TestMemoryOptionsRefused checks that options that cannot give a figure are
// an error naming them, not a division by zero.
func TestMemoryOptionsRefused(t *testing.T) {
	for _, o := range []MemoryOptions{
		{Contended: 1},
		{Sizes: []int{0}, Contended: 1},
		{Sizes: []int{10}, Contended: 0},
		{Sizes: []int{10}, Contended: 1, Ops: -1},
		{Sizes: []int{10}, Contended: 1, Goroutines: -1},
	} {
		if _, err := MeasureMemory(o, nil); err == nil {
			t.Errorf("MeasureMemory(%+v) = nil error, want one", o)
		}
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 7: "7", 999: "999", 1000: "1,000", -1234: "-1,234", 1234567: "1,234,567", 20000: "20,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
