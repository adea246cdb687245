package envoyrls

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every configuration that envoyproxy/ratelimit ships as an example or
// uses in its integration tests loads unmodified.
func TestTheExamplesOfEnvoyproxyRatelimitLoad(t *testing.T) {
	for dir, domains := range map[string]string{
		"testdata/envoyproxy/examples":    "mongo_cps rl",
		"testdata/envoyproxy/integration": "another basic share-threshold-test",
	} {
		c, err := LoadDir(dir)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if got := strings.Join(c.Domains(), " "); got != domains {
			t.Errorf("%s: domains %q, want %q", dir, got, domains)
		}
	}
}

// The test configurations of envoyproxy/ratelimit load where it loads them
// and are refused where it refuses them, each problem with its file, line,
// descriptor path and field.
func TestTheTestConfigsOfEnvoyproxyRatelimitMeanTheSame(t *testing.T) {
	files := readDir(t, "testdata/envoyproxy/test")
	valid := []string{"basic_config.yaml", "duplicate_domain.yaml", "merge_domain_key1.yaml", "merge_domain_key2.yaml",
		"metadata.yaml", "shadowmode_config.yaml", "share_threshold.yaml", "wildcard.yaml"}
	for _, name := range valid {
		if _, err := parseFiles(map[string]string{name: files[name]}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	refused := map[string]string{
		"bad_limit_unit.yaml":      `bad_limit_unit.yaml:6: test-domain.key1_value1: rate_limit.unit: "foo" is not a unit`,
		"bad_yaml.yaml":            `bad_yaml.yaml:2: not YAML`,
		"duplicate_key.yaml":       `duplicate_key.yaml:6: test-domain.key1_value1: duplicate descriptor`,
		"empty_domain.yaml":        `empty_domain.yaml:1: domain: missing`,
		"empty_key.yaml":           `empty_key.yaml:3: test-domain: descriptors[0].key: empty`,
		"misspelled_key.yaml":      `misspelled_key.yaml:5: test-domain.key1_value1: ratelimit: unknown field (did you mean "rate_limit"?)`,
		"misspelled_key2.yaml":     `misspelled_key2.yaml:7: test-domain.key1_value1: rate_limit.requestsperunit: unknown field (did you mean "requests_per_unit"?)`,
		"non_map_list.yaml":        `non_map_list.yaml:3: test-domain: descriptors[0]: "a" where a descriptor`,
		"non_string_key.yaml":      `non_string_key.yaml:1: key "0.25" is not a string`,
		"replaces_empty.yaml":      `replaces_empty.yaml:10: test-domain.key1_value1.subkey1: rate_limit.replaces[0].name: empty`,
		"replaces_self.yaml":       `replaces_self.yaml:8: test-domain.key1_value1.subkey1: rate_limit.replaces: replaces its own name "self"`,
		"unlimited_with_unit.yaml": `unlimited_with_unit.yaml:6: test-domain.foo: rate_limit.unit: given with unlimited`,
	}
	for name, want := range refused {
		_, err := parseFiles(map[string]string{name: files[name]})
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: got %v, want a problem starting %q", name, err, want)
		}
	}
	if len(valid)+len(refused) != len(files) {
		t.Errorf("%d test configs, %d judged: judge every one", len(files), len(valid)+len(refused))
	}
	// Two files of one domain are refused, naming both.
	_, err := parseFiles(map[string]string{"a.yaml": files["basic_config.yaml"], "b.yaml": files["duplicate_domain.yaml"]})
	if err == nil || !strings.Contains(err.Error(), `b.yaml:1: test-domain: domain: duplicate: a.yaml defines it too`) {
		t.Errorf("duplicate domain: %v", err)
	}
}

// A file with several problems reports them all, each once, with the
// ConfigError listing them in file order.
func TestEveryProblemOfAConfigIsReportedAtOnce(t *testing.T) {
	_, err := parseFiles(map[string]string{"x.yaml": `domain: d
descriptors:
  - key: a
    rate_limit: {unit: fortnight, requests_per_unit: 5}
  - key: b
    rate_limit: {unit: second, requests_per_unit: -1}
  - key: c
    shadow_mode: maybe
    rate_limit: {unit: second, requests_per_unit: 1}
    descriptors: {key: d}
  - key: e
    value: plain
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 1, unit: hour}
  - key: f
    rate_limit: [unit, second]
`})
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want a *ConfigError", err)
	}
	want := []string{
		`x.yaml:4: d.a: rate_limit.unit: "fortnight" is not a unit`,
		`x.yaml:6: d.b: rate_limit.requests_per_unit: "-1" is not a whole number`,
		`x.yaml:8: d.c: shadow_mode: "maybe" is not true or false`,
		`x.yaml:10: d.c: descriptors: a map where a list of descriptors belongs`,
		`x.yaml:13: d.e_plain: share_threshold: needs a value with a wildcard`,
		`x.yaml:14: d.e_plain: rate_limit.unit: given twice`,
		`x.yaml:16: d.f: rate_limit: a list where a map of unit and requests_per_unit belongs`,
	}
	if len(ce.Problems) != len(want) {
		t.Fatalf("%d problems, want %d:\n%v", len(ce.Problems), len(want), err)
	}
	for i, w := range want {
		if got := ce.Problems[i].String(); !strings.HasPrefix(got, w) {
			t.Errorf("problem %d: %q, want it to start %q", i, got, w)
		}
	}
}

// LoadDir reads the regular files of a directory, follows symbolic links
// as a mounted ConfigMap has them, and leaves out dot files and
// subdirectories.
func TestLoadDirReadsAConfigMapAsItsFiles(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "..2026_11_27")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(data, "a.yaml"), "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	must(t, os.Symlink("..2026_11_27", filepath.Join(dir, "..data")))
	must(t, os.Symlink("..data/a.yaml", filepath.Join(dir, "a.yaml")))
	write(t, filepath.Join(dir, ".hidden.yaml"), "not: [valid")
	c, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Domains(), " "); got != "a" {
		t.Fatalf("domains %q, want a", got)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	must(t, os.WriteFile(path, []byte(content), 0o644))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// FuzzLoadConfig: no input makes the loader panic, and a config it accepts
// answers any descriptor.
func FuzzLoadConfig(f *testing.F) {
	for _, dir := range []string{"testdata/envoyproxy/examples", "testdata/envoyproxy/integration", "testdata/envoyproxy/test"} {
		names, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(string(b))
		}
	}
	f.Add("domain: d\ndescriptors:\n  - &a {key: k, descriptors: [*a]}\n")
	f.Add("domain: [a]\n")
	f.Add("? [a]\n: b\n")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseFiles(map[string]string{"f.yaml": s})
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("error %v is not a ConfigError with problems", err)
			}
			return
		}
		for _, d := range c.Domains() {
			c.domains[d].find(desc("k", "v", "files", "files/x").Entries)
		}
	})
}
