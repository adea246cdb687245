package attwins

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The checker finds both breaches: a method that reads the clock without a
// twin, and one that takes a time without the suffix.
func TestTheCheckerFindsEachBreach(t *testing.T) {
	dir := t.TempDir()
	src := `package p

type clk struct{}

func (clk) Now() int64 { return 0 }

type L struct{ clock clk }

func (l *L) Allow() bool       { return l.clock.Now() > 0 }
func (l *L) Peek(now int64) bool { return now > 0 }
func (l *L) Fine() bool        { return l.clock.Now() > 0 }
func (l *L) FineAt(now int64) bool { return now > 0 }
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got, n, err := Check(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := "L.Allow reads the clock and has no AllowAt\nL.Peek takes a time: true; its name ends in At: false"
	if strings.Join(got, "\n") != want || n != 4 {
		t.Errorf("Check = %q over %d methods; want %q over 4", got, n, want)
	}
}
