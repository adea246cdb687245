package compare

import (
	"flag"
	"testing"
)

// TestRows runs every row of every Shape once, as -benchtime 1x would, so
// that go test checks that each Setup builds its structure in the state it
// intends (the Setups that can tell check it and fail otherwise) and that
// each operation runs, serially and in parallel. testing.Benchmark discards
// a failing row's log: to read it, run that row alone with
// go test -run xxx -bench 'Compare/<row>' -benchtime 1x. Rows that cannot
// run on this machine (the Redis rows without redis-server) are skipped.
func TestRows(t *testing.T) {
	benchtime := flag.Lookup("test.benchtime")
	old := benchtime.Value.String()
	if err := benchtime.Value.Set("1x"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := benchtime.Value.Set(old); err != nil {
			t.Error(err)
		}
	}()
	for _, r := range Rows() {
		t.Run(r.Name, func(t *testing.T) {
			if r.Unavailable != nil {
				if why := r.Unavailable(); why != "" {
					t.Skip(why)
				}
			}
			if res := testing.Benchmark(r.Fn); res.N != 1 {
				t.Errorf("ran %d times, want 1: its Setup failed", res.N)
			}
		})
	}
}
