package rulefile

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/slidegate/slidegate"
)

// readYAML reads data, one YAML document, into a tree. It returns the tree,
// or the problems that stop the file from being read at all: bad syntax, a
// second document, no rules.
func readYAML(data []byte) (*node, []slidegate.Problem) {
	in := &lineReader{data: data, ends: lineEnds(data, true)}
	docs, err := yamlDocuments(in)
	if err != nil {
		line := yamlErrorLine(data, in, err)
		return nil, []slidegate.Problem{{Line: line, Reason: yamlReason(err, lineOf(data, in.ends, line))}}
	}
	if len(docs) == 0 || isEmptyDocument(docs[0]) && len(docs) == 1 {
		return nil, []slidegate.Problem{{Reason: "the file has no rules, only comments; to clear the rules, write flow: []"}}
	}
	if len(docs) > 1 {
		// Refused rather than read in part: a reader that took the first
		// document would drop the rules of the others without a word.
		return nil, []slidegate.Problem{{Line: docs[1].Line,
			Reason: `a second document starts here ("---"); a rules file holds one: put all the rules in one document, or in files of their own`}}
	}
	y := yamlTree{budget: maxYAMLNodes}
	root := y.node(docs[0].Content[0], 0)
	return root, y.problems
}

// A lineReader gives the parser its data a line at a time, no Read
// crossing a line's end, so that when the parser stops at an error, the
// lines it has read end at most a few characters of lookahead past it.
type lineReader struct {
	data []byte
	ends []int // lineEnds(data, true)
	pos  int   // the bytes given
	line int   // the lines given whole
}

func (r *lineReader) Read(p []byte) (int, error) {
	if r.pos == len(r.data) {
		return 0, io.EOF
	}
	n := copy(p, r.data[r.pos:r.ends[r.line]])
	r.pos += n
	if r.pos == r.ends[r.line] {
		r.line++
	}
	return n, nil
}

// read returns the line (from 1) of the last byte given.
func (r *lineReader) read() int {
	if r.pos == 0 {
		return 1
	}
	if r.line > 0 && r.pos == r.ends[r.line-1] {
		return r.line
	}
	return r.line + 1 // within a line
}

// yamlDocuments parses in into its documents, leaving out empty ones after
// the first, and stops at the second that has content: one is all a rules
// file may hold, and a second is all it takes to refuse it.
func yamlDocuments(in io.Reader) (docs []*yaml.Node, err error) {
	defer func() {
		// The parser is another project's code reading a user's file: a
		// panic in it must be a problem with the file, not a crash.
		if p := recover(); p != nil {
			docs, err = nil, fmt.Errorf("yaml: %v", p)
		}
	}()
	d := yaml.NewDecoder(in)
	for len(docs) < 2 {
		doc := new(yaml.Node)
		switch err := d.Decode(doc); {
		case err == io.EOF:
			return docs, nil
		case err != nil:
			return nil, err
		}
		if len(docs) == 0 || !isEmptyDocument(doc) {
			docs = append(docs, doc)
		}
	}
	return docs, nil
}

// isEmptyDocument reports whether doc holds nothing: "---" alone, or null.
func isEmptyDocument(doc *yaml.Node) bool {
	return len(doc.Content) == 0 || doc.Content[0].Kind == yaml.ScalarNode && doc.Content[0].ShortTag() == "!!null"
}

// yamlErrorLine finds the line of a syntax error err, which the parser
// met reading in, a file's data. The parser reports the line where the
// construct it was reading began, counted from 0, so an indentation slip
// on line 4 of a list that starts on line 2 is reported as "line 1". The
// line a user must look at is the first line whose addition makes the file
// fail as the whole file fails: the shortest prefix of whole lines that
// gives the same error ends there. The parser reads a line at a time, and
// stopped at the error having read at most a few characters past it (a
// token's lookahead: at most 4 characters, which a few empty lines may
// hold), so the prefix of the lines it read fails as the file does; a
// prefix that stops early fails, if at all, with another error (an
// unclosed list, say), so the line is found by trying the prefixes one line
// shorter, a few at most. Each try reads the file up to there: finding the
// line costs a few reads of the file, whatever its length.
func yamlErrorLine(data []byte, in *lineReader, err error) int {
	want := err.Error()
	line := in.read()
	for tries := 0; line > 1 && tries < maxLookaheadLines; tries++ {
		prefix := &lineReader{data: data[:in.ends[line-2]], ends: in.ends[:line-1]}
		if _, e := yamlDocuments(prefix); e == nil || e.Error() != want {
			break
		}
		line--
	}
	return line
}

// maxLookaheadLines bounds the lines yamlErrorLine tries: more than the
// parser reads past an error.
const maxLookaheadLines = 8

// yamlReason says what a YAML syntax error means, in the words of someone
// writing a rules file rather than those of a YAML parser. text is the
// line the error is on.
func yamlReason(err error, text string) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if _, after, ok := strings.Cut(rest, ": "); ok {
			msg = after
		}
	}
	tabbed := strings.HasPrefix(strings.TrimLeft(text, " "), "\t")
	switch {
	case strings.Contains(msg, "did not find expected '-' indicator"):
		return `the indentation does not line up with the lines above: a rule's fields line up under its first field, and each rule starts with "- "`
	case strings.Contains(msg, "did not find expected key"):
		return "the indentation does not line up with the lines above: a field lines up under the fields before it"
	case strings.Contains(msg, "found a tab character"), tabbed && strings.Contains(msg, "cannot start any token"):
		return "a tab in the indentation: indent with spaces"
	case strings.Contains(msg, "could not find expected ':'"):
		return `a field's name must be followed by ":" and its value`
	case strings.Contains(msg, "mapping values are not allowed"):
		return `a ":" where none can be: is a ":" missing on the line above, is this line indented too far, or does a value hold ": " (then put it in quotes)?`
	case strings.Contains(msg, "block sequence entries are not allowed"):
		return `a list cannot start on the line of its field: put each "- " item on a line of its own below it`
	case strings.Contains(msg, "did not find expected ',' or ']'"):
		return "a list in [ ] is not closed with ], or its items are not separated by commas"
	case strings.Contains(msg, "did not find expected ',' or '}'"):
		return "a group of fields in { } is not closed with }, or its fields are not separated by commas"
	case strings.Contains(msg, "did not find expected node content"):
		return "a value is missing here"
	case strings.Contains(msg, "found unexpected end of stream"):
		return "the file ends in the middle of a value: is a closing quote missing?"
	case strings.Contains(msg, "cannot start any token"):
		return "a value cannot start with this character: put the value in quotes"
	case strings.Contains(msg, "found unknown escape character"):
		return `an unknown escape (\ and a letter) in a value in double quotes: use single quotes, or write \\ for \`
	case strings.Contains(msg, "control characters are not allowed"), strings.Contains(msg, "UTF-8"):
		return "the file is not UTF-8 text"
	case strings.HasPrefix(msg, "unknown anchor "):
		name := strings.TrimSuffix(strings.TrimPrefix(msg, "unknown anchor '"), "' referenced")
		return fmt.Sprintf("*%s refers to no anchor: mark the value it stands for with &%s above it", name, name)
	}
	return "this is not valid YAML: " + msg
}

// maxYAMLNodes bounds the nodes a tree is built of through aliases and
// merges: YAML lets a few lines stand for millions of values. The nodes
// the file writes out are bounded by its size, and cost nothing here.
const maxYAMLNodes = 100_000

// maxYAMLMerges is how deep "<<" merges may nest.
const maxYAMLMerges = 10

// yamlTree builds a tree from a YAML document.
type yamlTree struct {
	budget    int // nodes left to build through aliases and merges
	expanding int // how many aliases and merges the node being built is within
	problems  []slidegate.Problem
}

// node converts n at depth (0 the document's top, 1 its lists, 2 the rules,
// 3 their values): a value keeps its own YAML node, which decodes it, and
// is not converted further, for nothing in a rule is more than a value.
func (y *yamlTree) node(n *yaml.Node, depth int) *node {
	if n.Kind == yaml.AliasNode {
		y.expanding++
		defer func() { y.expanding-- }()
	}
	n = y.resolve(n)
	out := &node{line: n.Line, decode: n.Decode}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			out.kind = null
			break
		}
		out.kind, out.text, out.isText = scalar, n.Value, n.ShortTag() == "!!str"
	case yaml.SequenceNode:
		out.kind = list
		if depth < 3 {
			for _, item := range n.Content {
				if y.spend() {
					out.items = append(out.items, y.node(item, depth+1))
				}
			}
		}
	case yaml.MappingNode:
		out.kind = mapping
		if depth < 3 {
			out.fields = y.fields(n, depth, 0)
		} else {
			out.twice = func() (string, int, int, bool) { return yamlTwice(y.resolve, n) }
			out.decode = func(dst any) error { return decodeMapping(n, dst) }
		}
	default:
		out.kind = null
	}
	return out
}

// yamlTwice finds the first name mapping n gives twice (its merges, "<<",
// set names that the mapping may set again): its name, its line and its
// first's line.
func yamlTwice(resolve func(*yaml.Node) *yaml.Node, n *yaml.Node) (string, int, int, bool) {
	seen := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := resolve(n.Content[i])
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
			continue
		}
		if first, ok := seen[k.Value]; ok {
			return k.Value, k.Line, first, true
		}
		seen[k.Value] = k.Line
	}
	return "", 0, 0, false
}

// decodeMapping decodes mapping n into dst as n.Decode does, but a map of
// names to whole numbers (overrides) one entry at a time: yaml's decoder
// compares each name with every name before it, to find names given twice
// (which twice has looked for already), and so takes time in the square of
// their number, a third of a second for 10,000.
func decodeMapping(n *yaml.Node, dst any) error {
	m, ok := dst.(*map[string]int64)
	if !ok {
		return n.Decode(dst)
	}
	out := make(map[string]int64, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || v.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
			return n.Decode(dst) // aliases and merges: yaml's rules
		}
		key := k.Value
		if k.ShortTag() != "!!str" {
			if err := k.Decode(&key); err != nil {
				return err
			}
		}
		limit, err := strconv.ParseInt(v.Value, 10, 64)
		if v.ShortTag() != "!!int" || err != nil {
			if err := v.Decode(&limit); err != nil {
				return err
			}
		}
		out[key] = limit
	}
	*m = out
	return nil
}

// resolve follows an alias to the value it stands for.
func (y *yamlTree) resolve(n *yaml.Node) *yaml.Node {
	for hops := 0; n.Kind == yaml.AliasNode && n.Alias != nil && hops < maxYAMLMerges; hops++ {
		n = n.Alias
	}
	return n
}

// spend takes one node from the budget if it is built through an alias or
// a merge, and reports the file once when the budget runs out.
func (y *yamlTree) spend() bool {
	if y.expanding == 0 {
		return true
	}
	y.budget--
	if y.budget == -1 {
		y.problems = append(y.problems, slidegate.Problem{
			Reason: fmt.Sprintf("more than %d values through aliases and merges (<<): a rules file does not need so many", maxYAMLNodes)})
	}
	return y.budget >= 0
}

// fields lists the fields of mapping n in file order, then those merged in
// with "<<" that the mapping does not set itself, as YAML's merge key
// means: earlier sources win over later ones. A name the mapping sets twice
// is listed twice, for decode to report.
func (y *yamlTree) fields(n *yaml.Node, depth, merges int) []field {
	var own []field
	var sources []*yaml.Node
	for i := 0; i+1 < len(n.Content) && y.spend(); i += 2 {
		k, v := y.resolve(n.Content[i]), n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			sources = append(sources, v)
			continue
		}
		name := k.Value
		if k.Kind != yaml.ScalarNode {
			name = "" // decode reports a name that is not text
		}
		own = append(own, field{name: name, line: k.Line, value: y.node(v, depth+1)})
	}
	if len(sources) == 0 {
		return own
	}
	have := make(map[string]bool, len(own))
	for _, f := range own {
		have[f.name] = true
	}
	all := own
	for _, s := range sources {
		s = y.resolve(s)
		maps := []*yaml.Node{s}
		if s.Kind == yaml.SequenceNode {
			maps = maps[:0]
			for _, m := range s.Content {
				maps = append(maps, y.resolve(m))
			}
		}
		for _, m := range maps {
			if m.Kind != yaml.MappingNode || merges >= maxYAMLMerges {
				y.problems = append(y.problems, slidegate.Problem{Line: s.Line,
					Reason: "<< merges in the fields of a group of fields marked with &name: write <<: *name"})
				continue
			}
			y.expanding++
			for _, f := range y.fields(m, depth, merges+1) {
				if !have[f.name] {
					have[f.name] = true
					all = append(all, f)
				}
			}
			y.expanding--
		}
	}
	return all
}

// lineEnds returns the offset just past each line of data: past its line
// break, or the end of data for a last line without one. A line break is
// "\n", "\r\n" or a lone "\r", as editors count lines, and for YAML also
// NEL, LS and PS, as YAML counts them.
func lineEnds(data []byte, isYAML bool) []int {
	var ends []int
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case c == '\n':
			ends = append(ends, i+1)
		case c == '\r':
			if i+1 < len(data) && data[i+1] == '\n' {
				i++
			}
			ends = append(ends, i+1)
		case isYAML && c == 0xC2 && i+1 < len(data) && data[i+1] == 0x85: // NEL
			i++
			ends = append(ends, i+1)
		case isYAML && c == 0xE2 && i+2 < len(data) && data[i+1] == 0x80 && (data[i+2] == 0xA8 || data[i+2] == 0xA9): // LS, PS
			i += 2
			ends = append(ends, i+1)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] < len(data) {
		ends = append(ends, len(data))
	}
	return ends
}

// lineOf returns line n of data (from 1), whose lines end at ends, without
// its line break.
func lineOf(data []byte, ends []int, n int) string {
	if n < 1 || n > len(ends) {
		return ""
	}
	start := 0
	if n > 1 {
		start = ends[n-2]
	}
	return strings.TrimRight(string(data[start:ends[n-1]]), "\r\n")
}
