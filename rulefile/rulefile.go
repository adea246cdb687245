package rulefile

import (
	"bytes"
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/slidegate/slidegate"
)

// Parse reads rules from data, named name in errors. name's extension picks
// the format: ".json" for JSON, anything else YAML. It returns the rules,
// or a *slidegate.RulesError with name as its Source listing every problem
// of the file, each with its line where it has one, in the order of the
// lines: bad syntax (which stops the reading), a second YAML document,
// unknown fields, values of the wrong type, fields given twice, required
// fields left out, and what Rules.Validate finds in the values read.
//
// A file with no rules at all (empty, only comments, or a list given no
// value, as in "flow:" alone) is a problem rather than a way to clear the
// rules, for that is how a file cut short reads; "flow: []" or {} clears
// them.
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

// Load reads and parses the rules file at path.
func Load(path string) (slidegate.Rules, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return slidegate.Rules{}, err
	}
	return Parse(path, data)
}

// Apply puts the rules of the file at path in force in g. If the file cannot
// be read or has any problem, g keeps the rules it has.
func Apply(g *slidegate.Guard, path string) error {
	r, err := Load(path)
	if err != nil {
		return err
	}
	return g.SetRules(r)
}
