package rulefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sort"
	"strings"

	"github.com/slidegate/slidegate"
)

// readJSON reads data, one JSON object, into a tree. It returns the tree, or
// the problem that stops the file from being read at all: bad syntax, or
// more after the object.
func readJSON(data []byte) (*node, []slidegate.Problem) {
	j := &jsonTree{data: data, ends: lineEnds(data, false), dec: json.NewDecoder(bytes.NewReader(data))}
	root, err := j.value(0)
	if err != nil {
		return nil, []slidegate.Problem{j.problem(err)}
	}
	pos := j.start()
	if _, err := j.dec.Token(); err != io.EOF {
		return nil, []slidegate.Problem{{Line: j.line(pos), Reason: "data after the rules: a rules file holds one { }"}}
	}
	return root, nil
}

// jsonTree builds a tree from JSON with a json.Decoder, reading tokens
// where the tree has structure and whole values below it, and taking each
// line from the offset where its value starts.
type jsonTree struct {
	data []byte
	ends []int // lineEnds(data)
	dec  *json.Decoder
}

// start returns the offset where the next value or name starts: the
// decoder stands after the last token it returned, before any space,
// comma or colon.
func (j *jsonTree) start() int {
	pos := int(j.dec.InputOffset())
	for pos < len(j.data) && strings.IndexByte(" \t\r\n,:", j.data[pos]) >= 0 {
		pos++
	}
	return pos
}

// line returns the line (from 1) of the byte at offset pos.
func (j *jsonTree) line(pos int) int {
	pos = min(pos, len(j.data)-1) // the end of the file is on its last line
	return sort.SearchInts(j.ends, pos+1) + 1
}

// value reads the next value at depth (0 the top, 1 its lists, 2 the rules,
// 3 their values), objects and arrays as nodes down to the rules and any
// value below as a leaf.
func (j *jsonTree) value(depth int) (*node, error) {
	pos := j.start()
	n := &node{line: j.line(pos)}
	if depth < 3 && pos < len(j.data) && (j.data[pos] == '{' || j.data[pos] == '[') {
		if _, err := j.dec.Token(); err != nil {
			return nil, err
		}
		for j.dec.More() {
			if j.data[pos] == '[' {
				item, err := j.value(depth + 1)
				if err != nil {
					return nil, err
				}
				n.items = append(n.items, item)
				continue
			}
			at := j.start()
			name, err := j.dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := j.value(depth + 1)
			if err != nil {
				return nil, err
			}
			n.fields = append(n.fields, field{name: name.(string), line: j.line(at), value: v})
		}
		if _, err := j.dec.Token(); err != nil { // the closing } or ]
			return nil, err
		}
		n.kind = mapping
		if j.data[pos] == '[' {
			n.kind = list
		}
		raw := j.data[pos:j.dec.InputOffset()]
		n.decode = func(dst any) error { return json.Unmarshal(raw, dst) }
		return n, nil
	}
	var raw json.RawMessage
	if err := j.dec.Decode(&raw); err != nil {
		return nil, err
	}
	n.decode = func(dst any) error { return json.Unmarshal(raw, dst) }
	if raw[0] == '{' {
		at := pos
		n.twice = func() (string, int, int, bool) { return j.twice(at, raw) }
	}
	switch raw[0] {
	case '"':
		n.kind, n.isText = scalar, true
		_ = json.Unmarshal(raw, &n.text)
	case 'n':
		n.kind = null
	case '{':
		n.kind = mapping
	case '[':
		n.kind = list
	default:
		n.kind, n.text = scalar, string(raw)
	}
	return n, nil
}

// problem turns a JSON syntax error into a problem on its line, said in
// the words of someone writing a rules file.
func (j *jsonTree) problem(err error) slidegate.Problem {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		// Offset is where the decoder began the token it stumbled on, or
		// the space before it.
		pos := min(max(int(se.Offset), 0), len(j.data))
		for pos < len(j.data) && strings.IndexByte(" \t\r\n", j.data[pos]) >= 0 {
			pos++
		}
		return slidegate.Problem{Line: j.line(pos), Reason: jsonReason(se.Error())}
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return slidegate.Problem{Line: max(len(j.ends), 1), Reason: "the file ends before the rules do: a } or ] is missing"}
	}
	return slidegate.Problem{Reason: "this is not valid JSON: " + err.Error()}
}

// jsonReason says what encoding/json's syntax error msg means.
func jsonReason(msg string) string {
	switch {
	case strings.HasSuffix(msg, "after object key"):
		return `a field's name must be followed by ":" and its value`
	case strings.HasSuffix(msg, "after object key:value pair"):
		return "fields must be separated by commas, and the group of fields closed with }"
	case strings.HasSuffix(msg, "after array element"):
		return "list items must be separated by commas, and the list closed with ]"
	case strings.HasSuffix(msg, "looking for beginning of object key string"):
		return "a field's name must be in double quotes, and no comma may come before }"
	case strings.Contains(msg, "in string literal"):
		return "a value in double quotes holds a line break or a control character, or is not closed"
	case strings.HasSuffix(msg, "looking for beginning of value"), strings.Contains(msg, "in literal"),
		strings.Contains(msg, "in numeric literal"):
		return "a value is missing or is not a JSON value here: text goes in double quotes, and no comma may come before ] or }"
	case strings.Contains(msg, "unexpected end of JSON input"):
		return "the file ends before the rules do: a } or ] is missing"
	}
	return "this is not valid JSON: " + msg
}

// twice finds the first name the JSON object raw, at offset at, gives
// twice: its name, its line and its first's line. encoding/json takes the
// last silently.
func (j *jsonTree) twice(at int, raw []byte) (string, int, int, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // {
		return "", 0, 0, false
	}
	seen := map[string]int{}
	for dec.More() {
		pos := at + int(dec.InputOffset())
		for pos < len(j.data) && strings.IndexByte(" \t\r\n,", j.data[pos]) >= 0 {
			pos++
		}
		tok, err := dec.Token()
		name, ok := tok.(string)
		if err != nil || !ok {
			return "", 0, 0, false
		}
		if first, ok := seen[name]; ok {
			return name, j.line(pos), first, true
		}
		seen[name] = j.line(pos)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", 0, 0, false
		}
	}
	return "", 0, 0, false
}
