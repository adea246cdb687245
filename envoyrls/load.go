package envoyrls

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"
)

// Bounds of what LoadDir reads: a directory holds at most maxFiles files of
// at most maxFileBytes each.
const (
	maxFiles     = 1024
	maxFileBytes = 8 << 20
)

// A Problem is one thing wrong in a config file.
type Problem struct {
	File   string // the file's name in its directory
	Line   int    // 0 when the problem has no line
	Path   string // the descriptor's path, "domain.key_value.key"; "" at the top
	Field  string // the field, "rate_limit.unit"; "" for the descriptor itself
	Reason string
}

// String returns the problem as FILE:LINE: PATH: FIELD: REASON, leaving out
// the parts it lacks.
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	for _, s := range []string{p.Path, p.Field, p.Reason} {
		if s != "" {
			b.WriteString(": ")
			b.WriteString(s)
		}
	}
	return b.String()
}

// A ConfigError is every problem of a directory's config files. A config
// with any problem is refused whole.
type ConfigError struct {
	Problems []Problem
}

func (e *ConfigError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// LoadDir reads the config files of dir, one domain each, in the format of
// envoyproxy/ratelimit. It reads every regular file of the directory,
// following symbolic links, and leaves out names that begin with a dot
// and subdirectories: a Kubernetes ConfigMap mounted there reads as its
// files. A problem in any file is a [*ConfigError] that lists them all.
func LoadDir(dir string) (*Config, error) {
	c, _, err := loadDir(dir)
	return c, err
}

// loadDir is LoadDir, and a hash of the files' names and contents.
func loadDir(dir string) (*Config, uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, err
	}
	var files []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		st, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, 0, err
		}
		if st.Mode().IsRegular() {
			files = append(files, e.Name())
		}
	}
	if len(files) > maxFiles {
		return nil, 0, fmt.Errorf("%s holds %d files, more than %d", dir, len(files), maxFiles)
	}
	l := newLoader()
	h := fnv.New64a()
	for _, name := range files {
		data, err := readBounded(filepath.Join(dir, name))
		if err != nil {
			l.add(Problem{File: name, Reason: err.Error()})
			continue
		}
		fmt.Fprintf(h, "%d:%s%d:", len(name), name, len(data))
		h.Write(data)
		l.file(name, data)
	}
	c, err := l.done()
	return c, h.Sum64(), err
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxFileBytes)
	}
	return data, nil
}

// parseFiles loads the named contents as one config; for the tests.
func parseFiles(files map[string]string) (*Config, error) {
	l := newLoader()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		l.file(n, []byte(files[n]))
	}
	return l.done()
}

// A loader builds a Config from files, gathering every problem.
type loader struct {
	cfg      *Config
	from     map[string]string // domain: the file that holds it
	problems []Problem
	name     string // the file being read
}

func newLoader() *loader {
	return &loader{cfg: &Config{domains: map[string]*level{}}, from: map[string]string{}}
}

func (l *loader) add(p Problem) { l.problems = append(l.problems, p) }

func (l *loader) problem(n *yaml.Node, path, field, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	l.add(Problem{File: l.name, Line: line, Path: path, Field: field, Reason: fmt.Sprintf(format, args...)})
}

func (l *loader) done() (*Config, error) {
	if len(l.problems) > 0 {
		return nil, &ConfigError{Problems: l.problems}
	}
	return l.cfg, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// file reads one file: one YAML document, a map of domain and descriptors.
func (l *loader) file(name string, data []byte) {
	l.name = name
	l.cfg.files++
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		msg := err.Error()
		line := 0
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			line, _ = strconv.Atoi(m[1])
			msg = msg[len(m[0]):]
		}
		l.add(Problem{File: name, Line: line, Reason: "not YAML: " + strings.TrimPrefix(msg, "yaml: ")})
		return
	}
	var more yaml.Node
	if err := dec.Decode(&more); err == nil {
		l.problem(&more, "", "", "a second YAML document: a file holds one domain")
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		if root.Kind == 0 || isNull(root) {
			l.problem(nil, "", "domain", "missing: the file is empty")
		} else {
			l.problem(root, "", "", "%s where a map of domain and descriptors belongs", kindOf(root))
		}
		return
	}
	var domain string
	var domainNode, descs *yaml.Node
	l.fields(root, "", "", rootFields, func(k string, v *yaml.Node) {
		switch k {
		case "domain":
			domain, _ = l.str(v, "", "domain")
			domainNode = v
		case "descriptors":
			descs = v
		}
	})
	switch {
	case domainNode == nil:
		l.problem(root, "", "domain", "missing")
		return
	case domain == "":
		l.problem(domainNode, "", "domain", "empty")
		return
	}
	if other, ok := l.from[domain]; ok {
		l.problem(domainNode, domain, "domain", "duplicate: %s defines it too", other)
		return
	}
	l.from[domain] = name
	lv := &level{exact: map[string]*descNode{}}
	l.descriptors(descs, domain, lv, false)
	l.cfg.domains[domain] = lv
}

var (
	rootFields       = []string{"domain", "descriptors"}
	descriptorFields = []string{"key", "value", "rate_limit", "descriptors", "shadow_mode", "quota_mode", "detailed_metric", "value_to_metric", "share_threshold", "metadata"}
	rateLimitFields  = []string{"requests_per_unit", "unit", "unlimited", "name", "replaces"}
	replacesFields   = []string{"name"}
)

// fields calls f for each field of map n in turn, reporting keys that are
// not strings, unknown or given twice.
func (l *loader) fields(n *yaml.Node, path, prefix string, known []string, f func(k string, v *yaml.Node)) {
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			l.problem(k, path, prefix, "key %s is not a string", describe(k))
			continue
		}
		switch {
		case !slices.Contains(known, k.Value):
			hint := ""
			if s := closest(k.Value, known); s != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", s)
			}
			l.problem(k, path, prefix+k.Value, "unknown field%s: known are %s", hint, strings.Join(known, ", "))
		case seen[k.Value]:
			l.problem(k, path, prefix+k.Value, "given twice")
		default:
			seen[k.Value] = true
			f(k.Value, v)
		}
	}
}

// descriptors reads the list n of descriptors under path into lv;
// toMetric says that a descriptor above has value_to_metric.
func (l *loader) descriptors(n *yaml.Node, path string, lv *level, toMetric bool) {
	if n == nil || isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		l.problem(n, path, "descriptors", "%s where a list of descriptors belongs", kindOf(n))
		return
	}
	for i, d := range n.Content {
		field := fmt.Sprintf("descriptors[%d]", i)
		if d.Kind != yaml.MappingNode {
			l.problem(d, path, field, "%s where a descriptor, a map of key, value and rate_limit, belongs", describe(d))
			continue
		}
		l.descriptor(d, path, field, lv, toMetric)
	}
}

// descriptor reads map n, a descriptor under path, into lv. Its problems
// name it by its path, once it has a key; field is its place in the list.
func (l *loader) descriptor(n *yaml.Node, path, field string, lv *level, toMetricAbove bool) {
	key, value := scalarField(n, "key"), scalarField(n, "value")
	kv := key
	if value != "" {
		kv += "_" + value
	}
	here, prefix := path+"."+kv, ""
	if key == "" {
		here, prefix = path, field+"."
	}
	var keyNode, shareNode, rl, children *yaml.Node
	var shadow, quota, detailed, toMetric, share bool
	l.fields(n, here, prefix, descriptorFields, func(k string, v *yaml.Node) {
		switch k {
		case "key":
			l.str(v, here, prefix+"key")
			keyNode = v
		case "value":
			l.str(v, here, prefix+"value")
		case "rate_limit":
			rl = v
		case "descriptors":
			children = v
		case "shadow_mode":
			shadow = l.bool(v, here, prefix+"shadow_mode")
		case "quota_mode":
			quota = l.bool(v, here, prefix+"quota_mode")
		case "detailed_metric":
			detailed = l.bool(v, here, prefix+"detailed_metric")
		case "value_to_metric":
			toMetric = l.bool(v, here, prefix+"value_to_metric")
		case "share_threshold":
			share, shareNode = l.bool(v, here, prefix+"share_threshold"), v
		case "metadata":
			// Kept as envoyproxy/ratelimit keeps it: any YAML, unread.
		}
	})
	if key == "" {
		at := keyNode
		if at == nil {
			at = n
		}
		l.problem(at, path, field+".key", "empty: a descriptor needs a key")
		return
	}
	if _, dup := lv.exact[kv]; dup {
		l.problem(keyNode, here, "", "duplicate descriptor: key %q and value %q are given twice at this depth", key, value)
		return
	}
	d := &descNode{children: level{exact: map[string]*descNode{}}, name: kv, toMetric: toMetric}
	if share {
		if !strings.Contains(kv, "*") {
			l.problem(shareNode, here, "share_threshold", "needs a value with a wildcard '*'")
		}
		d.share = true
	}
	if rl != nil && !isNull(rl) {
		d.rule = l.rateLimit(rl, here, "rate_limit")
		if d.rule != nil {
			d.rule.id = here
			d.rule.shadow, d.rule.quota, d.rule.detailed, d.rule.toMetric = shadow, quota, detailed, toMetric || toMetricAbove
		}
	}
	l.descriptors(children, here, &d.children, toMetric || toMetricAbove)
	if strings.Contains(kv, "*") {
		d.pattern = strings.TrimPrefix(kv, key+"_")
		lv.wild = append(lv.wild, wildNode{parts: strings.Split(kv, "*"), node: d})
		// The pattern is also its own exact key, as envoyproxy/ratelimit
		// finds it: a value that is the pattern itself matches it.
	}
	lv.exact[kv] = d
}

// scalarField returns the text of map n's field name if it is a scalar
// given once, else "".
func scalarField(n *yaml.Node, name string) string {
	v, found := "", 0
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, x := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Value == name {
			found++
			if x.Kind == yaml.ScalarNode && !isNull(x) {
				v = x.Value
			}
		}
	}
	if found != 1 {
		return ""
	}
	return v
}

// rateLimit reads a descriptor's rate_limit map n.
func (l *loader) rateLimit(n *yaml.Node, path, field string) *rule {
	if n.Kind != yaml.MappingNode {
		l.problem(n, path, field, "%s where a map of unit and requests_per_unit belongs", describe(n))
		return nil
	}
	r := &rule{}
	var unitNode *yaml.Node
	var unit string
	before := len(l.problems)
	l.fields(n, path, field+".", rateLimitFields, func(k string, v *yaml.Node) {
		switch k {
		case "requests_per_unit":
			if s, ok := l.str(v, path, field+".requests_per_unit"); ok {
				x, err := strconv.ParseUint(s, 10, 32)
				if err != nil {
					x, err = strconv.ParseUint(s, 0, 32)
				}
				if err != nil {
					l.problem(v, path, field+".requests_per_unit", "%q is not a whole number from 0 to 4294967295", s)
				}
				r.limit = uint32(x)
			}
		case "unit":
			unitNode = v
			unit, _ = l.str(v, path, field+".unit")
		case "unlimited":
			r.unlimited = l.bool(v, path, field+".unlimited")
		case "name":
			r.name, _ = l.str(v, path, field+".name")
		case "replaces":
			r.replaces = l.replaces(v, path, field+".replaces")
		}
	})
	u, known := rlsv3.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(unit)]
	valid := known && u != int32(rlsv3.RateLimitResponse_RateLimit_UNKNOWN)
	switch {
	case r.unlimited && unitNode != nil && !isNull(unitNode):
		l.problem(unitNode, path, field+".unit", "given with unlimited: an unlimited rule has no unit")
	case r.unlimited:
	case unitNode == nil || unit == "":
		at := unitNode
		if at == nil {
			at = n
		}
		l.problem(at, path, field+".unit", "missing: write second, minute, hour, day, week, month or year (or unlimited: true)")
	case !valid:
		l.problem(unitNode, path, field+".unit", "%q is not a unit: write second, minute, hour, day, week, month or year", unit)
	}
	for _, x := range r.replaces {
		if x != "" && x == r.name {
			l.problem(n, path, field+".replaces", "replaces its own name %q", x)
		}
	}
	if len(l.problems) > before {
		return nil
	}
	r.unit = rlsv3.RateLimitResponse_RateLimit_Unit(u)
	r.answer = &rlsv3.RateLimitResponse_RateLimit{Name: r.name, RequestsPerUnit: r.limit, Unit: r.unit}
	return r
}

// replaces reads a rate_limit's list of names it replaces.
func (l *loader) replaces(n *yaml.Node, path, field string) []string {
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		l.problem(n, path, field, "%s where a list of - name: NAME belongs", kindOf(n))
		return nil
	}
	var names []string
	for i, x := range n.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		if x.Kind != yaml.MappingNode {
			l.problem(x, path, f, "%s where a map with a name belongs", describe(x))
			continue
		}
		name := ""
		l.fields(x, path, f+".", replacesFields, func(_ string, v *yaml.Node) { name, _ = l.str(v, path, f+".name") })
		if name == "" {
			l.problem(x, path, f+".name", "empty: a rule replaces another by its name")
			continue
		}
		names = append(names, name)
	}
	return names
}

// str reads a scalar as its text; null is "". Any other node is a problem.
func (l *loader) str(n *yaml.Node, path, field string) (string, bool) {
	if isNull(n) {
		return "", true
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.ScalarNode {
		l.problem(n, path, field, "%s where a string belongs", kindOf(n))
		return "", false
	}
	return n.Value, true
}

// bool reads a scalar as YAML 1.1 reads a boolean, as envoyproxy/ratelimit
// does: true, yes, on, y and their opposites, in any case.
func (l *loader) bool(n *yaml.Node, path, field string) bool {
	if isNull(n) {
		return false
	}
	s, ok := l.str(n, path, field)
	if !ok {
		return false
	}
	switch strings.ToLower(s) {
	case "true", "yes", "on", "y":
		return true
	case "false", "no", "off", "n":
		return false
	}
	l.problem(n, path, field, "%q is not true or false", s)
	return false
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func kindOf(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a map"
	case yaml.AliasNode:
		return "an alias"
	}
	return "a scalar"
}

// describe names a node in a problem: a scalar by its value, cut short.
func describe(n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode {
		return kindOf(n)
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "…"
	}
	return strconv.Quote(v)
}

// closest returns the known name that s most likely misspells, or "".
func closest(s string, known []string) string {
	norm := func(x string) string { return strings.ReplaceAll(strings.ToLower(x), "_", "") }
	best, bestD := "", 3
	for _, k := range known {
		if norm(k) == norm(s) {
			return k
		}
		if d := distance(s, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// distance is the Levenshtein distance of a and b, for short names.
func distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
