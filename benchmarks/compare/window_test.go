package compare

import "testing"

// BenchmarkCompare runs every row as a sub-benchmark named
// Shape/mode/implementation, e.g. -bench 'Compare/AddClock/parallel'.
// cmd/comparetable runs the same rows and prints them as a table.
func BenchmarkCompare(b *testing.B) {
	for _, r := range Rows() {
		b.Run(r.Name, r.Fn)
	}
}
