package rulefile

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/internal/bounds"
)

// manyRulesYAML returns a rules file of n QPS rules, each on lines of its
// own, as people write them.
func manyRulesYAML(n int) []byte {
	var b strings.Builder
	b.WriteString("flow:\n")
	for i := range n {
		b.WriteString("  - resource: GET /api/v1/items-" + strconv.Itoa(i) + "\n    limit: 100\n")
	}
	return []byte(b.String())
}

// allocated returns the bytes that parsing data allocates, and the error.
func allocated(name string, data []byte) (uint64, error) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Parse(name, data)
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, err
}

// TestAnErrorOnTheLastLineCostsWhatReadingTheFileDoes: finding the line of
// a syntax error at the end of a large file costs about what reading the
// file does, not a read per halving of the file.
func TestAnErrorOnTheLastLineCostsWhatReadingTheFileDoes(t *testing.T) {
	good := manyRulesYAML(19000) // 1 MB, within maxFileSize
	bad := append(good[:len(good):len(good)], "  - resource: x\n   limit: 1\n"...)
	lines := strings.Count(string(bad), "\n")
	start := time.Now()
	goodBytes, err := allocated("r.yaml", good)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	badBytes, err := allocated("r.yaml", bad)
	tookBad := time.Since(start)
	var re *slidegate.RulesError
	if !errors.As(err, &re) || len(re.Problems) != 1 || re.Problems[0].Line != lines {
		t.Fatalf("%v, want one problem on line %d", err, lines)
	}
	t.Logf("%d bytes: read in %v, %d MB; with an error on its last line %v, %d MB", len(bad), took, goodBytes>>20, tookBad, badBytes>>20)
	if badBytes > 3*goodBytes {
		t.Fatalf("the error's line took %d MB to find; reading the file takes %d MB", badBytes>>20, goodBytes>>20)
	}
}

// TestAPlainFileOfManyRulesIsRead: no limit meant for YAML's aliases and
// merges refuses a file that has none, however many rules it holds.
func TestAPlainFileOfManyRulesIsRead(t *testing.T) {
	r, err := Parse("r.yaml", manyRulesYAML(40000))
	if err != nil || len(r.Flow) != 40000 {
		t.Fatalf("%d rules, %v", len(r.Flow), err)
	}
}

// TestAFileOverTheSizeLimitIsRefusedUnread: Load, Apply and File refuse a
// file larger than maxFileSize, saying how large it is and the limit, and
// the rules in force stay.
func TestAFileOverTheSizeLimitIsRefusedUnread(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	data := manyRulesYAML(40000) // valid, but 2 MB
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	want := "the file is " + strconv.Itoa(len(data)) + " bytes, more than the limit of " + strconv.Itoa(maxFileSize)
	check := func(what string, err error) {
		t.Helper()
		var re *slidegate.RulesError
		if !errors.As(err, &re) || re.Source != path || len(re.Problems) != 1 || !strings.Contains(re.Problems[0].Reason, want) {
			t.Fatalf("%s: %v, want a problem saying %q", what, err, want)
		}
	}
	_, err := Load(path)
	check("Load", err)
	g, err := slidegate.New()
	if err != nil {
		t.Fatal(err)
	}
	before := slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "a", Limit: 1}}}
	if err := g.SetRules(before); err != nil {
		t.Fatal(err)
	}
	_, err = Watch(g, path)
	check("Watch", err)
	if r := g.Rules(); len(r.Flow) != 1 || r.Flow[0].Resource != "a" {
		t.Fatalf("rules in force %+v", r)
	}
	src, err := File(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	_, err = src.Rules(t.Context())
	check("File", err)
	// At the limit, a file is read.
	if err := os.WriteFile(path, append(manyRulesYAML(1), strings.Repeat("#", maxFileSize-len(manyRulesYAML(1))-1)+"\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := Load(path); err != nil || len(r.Flow) != 1 {
		t.Fatalf("a file of maxFileSize bytes: %d rules, %v", len(r.Flow), err)
	}
}

// TestJSONOverridesGivenTwiceAreRefused: a key given two overrides is a
// problem in JSON as in YAML (where the last would otherwise win without a
// word), on the overrides' line, naming the key and both its lines.
func TestJSONOverridesGivenTwiceAreRefused(t *testing.T) {
	for _, tc := range []struct{ name, data, want string }{
		{"r.json", "{\"flow\": [{\"resource\": \"a\", \"limit\": 1, \"per_key\": true,\n \"overrides\": {\"k\": 1,\n \"j\": 3,\n \"k\": 2}}]}",
			`"k" given again on line 4 (first on line 2)`},
		{"r.yaml", "flow:\n  - resource: a\n    limit: 1\n    per_key: true\n    overrides:\n      k: 1\n      j: 3\n      k: 2\n",
			`"k" given again on line 8 (first on line 6)`},
	} {
		_, err := Parse(tc.name, []byte(tc.data))
		var re *slidegate.RulesError
		if !errors.As(err, &re) || len(re.Problems) != 1 {
			t.Fatalf("%s: %v, want one problem", tc.name, err)
		}
		p := re.Problems[0]
		if p.Rule != "flow[0]" || p.Field != "overrides" || p.Line == 0 || !strings.Contains(p.Reason, tc.want) {
			t.Fatalf("%s: %v", tc.name, p)
		}
	}
}

// BenchmarkParseLargeYAML parses a YAML file of maxFileSize, as it is and
// with a syntax error on its last line.
func BenchmarkParseLargeYAML(b *testing.B) {
	good := manyRulesYAML(19000)
	bad := append(good[:len(good):len(good)], "  - resource: x\n   limit: 1\n"...)
	for _, tc := range []struct {
		name string
		data []byte
	}{{"valid", good}, {"error on the last line", bad}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Parse("r.yaml", tc.data)
			}
		})
	}
}

// BenchmarkParseOverrides parses a per-key rule of MaxOverrides overrides,
// in YAML and in JSON.
func BenchmarkParseOverrides(b *testing.B) {
	var y, j strings.Builder
	y.WriteString("flow:\n  - resource: api\n    limit: 10\n    per_key: true\n    overrides:\n")
	j.WriteString(`{"flow": [{"resource": "api", "limit": 10, "per_key": true, "overrides": {`)
	for i := range bounds.MaxOverrides {
		key := "tenant-" + strconv.Itoa(i)
		y.WriteString("      " + key + ": 50\n")
		if i > 0 {
			j.WriteString(",\n")
		}
		j.WriteString(`"` + key + `": 50`)
	}
	j.WriteString("}}]}\n")
	for _, tc := range []struct{ name, data string }{{"r.yaml", y.String()}, {"r.json", j.String()}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(tc.name, []byte(tc.data)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
