package rulefile

import (
	"bytes"
	"cmp"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/slidegate/slidegate"
)

// Parse reads rules from data, named name in errors. name's extension
// picks the format: ".json" for JSON, anything else YAML.
//
// Parse returns the rules, or a [*slidegate.RulesError] with name as its
// Source. The error lists every problem of the file in the order of the
// lines, each with its line where it has one. It finds these problems:
//
//   - Bad syntax, which stops the reading.
//   - A second YAML document.
//   - Unknown fields.
//   - Values of the wrong type.
//   - Fields given twice, and keys given two overrides, in JSON or YAML.
//   - Required fields left out.
//   - What [slidegate.Rules.Validate] finds in the values read.
//
// A file with no rules at all is a problem rather than a way to clear the
// rules, for that is how a file cut short reads. Such a file is empty,
// holds only comments, or gives a list no value, as in "flow:" alone.
// "flow: []" or {} clears the rules.
//
// Parse costs time and memory in proportion to the size of data, whether
// it has a problem or not. It reads data of any size. [Load] and [File]
// bound the size (1 MiB).
func Parse(name string, data []byte) (slidegate.Rules, error) {
	return parse(name, data, strings.EqualFold(filepath.Ext(name), ".json"))
}

// parse is Parse with the format given: JSON if isJSON, else YAML.
func parse(name string, data []byte, isJSON bool) (slidegate.Rules, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		clear := "flow: []"
		if isJSON {
			clear = "{}"
		}
		return slidegate.Rules{}, &slidegate.RulesError{Source: name, Problems: []slidegate.Problem{
			{Reason: "the file is empty; to clear the rules, write " + clear}}}
	}
	var root *node
	var problems []slidegate.Problem
	if isJSON {
		root, problems = readJSON(data)
	} else {
		root, problems = readYAML(data)
	}
	var r slidegate.Rules
	if root != nil {
		var more []slidegate.Problem
		r, more = decode(root, isJSON)
		problems = append(problems, more...)
	}
	if len(problems) > 0 {
		slices.SortStableFunc(problems, func(a, b slidegate.Problem) int { return cmp.Compare(a.Line, b.Line) })
		return slidegate.Rules{}, &slidegate.RulesError{Source: name, Problems: problems}
	}
	return r, nil
}

// maxFileSize is the largest rules file, in bytes, that Load, Watch and
// File read: 1 MiB, as etcdrules's default limit and a Kubernetes
// ConfigMap allow (see Load).
const maxFileSize = 1 << 20

// Load reads and parses the rules file at path, of at most 1 MiB. That is
// far more than rules need: 10,000 overrides take some 300 KB. [Watch] and
// [File] read files as Load does. A larger file is refused unread, with a
// [*slidegate.RulesError] saying its size and the limit. The rules in
// force stay.
func Load(path string) (slidegate.Rules, error) {
	data, err := readFile(path)
	if err != nil {
		return slidegate.Rules{}, err
	}
	return Parse(path, data)
}

// readFile reads the rules file at path, or returns the error of a file
// that cannot be read, or a *slidegate.RulesError for one larger than
// maxFileSize, of which it reads no more than that.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := int64(-1)
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		size = fi.Size()
	}
	if size > maxFileSize {
		return nil, tooLarge(path, size)
	}
	// A file may grow between the size and the read: read one byte more
	// than the limit to know.
	data := make([]byte, 0, min(max(size, 0), maxFileSize)+1)
	data, err = readUpTo(f, data, maxFileSize+1)
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileSize {
		return nil, tooLarge(path, -1)
	}
	return data, nil
}

// readUpTo appends to data what r reads, until EOF or until data holds n
// bytes.
func readUpTo(r io.Reader, data []byte, n int) ([]byte, error) {
	for len(data) < n {
		if len(data) == cap(data) {
			data = slices.Grow(data, min(max(cap(data), 512), n-len(data)))
		}
		m, err := r.Read(data[len(data):min(cap(data), n)])
		data = data[:len(data)+m]
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
	}
	return data, nil
}

// tooLarge is the problem of a file of size bytes (-1: more than the
// limit, its size unknown).
func tooLarge(path string, size int64) error {
	what := "more than " + strconv.Itoa(maxFileSize) + " bytes"
	if size >= 0 {
		what = strconv.FormatInt(size, 10) + " bytes, more than the limit of " + strconv.Itoa(maxFileSize)
	}
	return &slidegate.RulesError{Source: path, Problems: []slidegate.Problem{{
		Reason: "the file is " + what + ""}}}
}
