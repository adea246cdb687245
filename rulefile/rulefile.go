// Package rulefile reads a guard's rules from YAML and JSON files, and keeps
// a guard's rules in step with a file as it changes.
//
// A rules file holds a slidegate.Rules, with the field names of its json and
// yaml tags and durations written as "500ms":
//
//	flow:
//	  - resource: GET /orders
//	    limit: 100
//	    interval: 1s
//	  - resource: GET /orders
//	    type: concurrency
//	    limit: 20
//	breakers:
//	  - resource: mysql
//	    strategy: error_ratio
//	    threshold: 0.5
//	    open_timeout: 5s
//
// Reading is strict: an unknown field, a value of the wrong type and every
// problem Rules.Validate finds are reported, each with its place, and a file
// with any problem is never applied in part. The package is separate from
// slidegate so that the core packages depend on the standard library only.
package rulefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/slidegate/slidegate"
)

// Parse reads rules from data, named name in errors. name's extension picks
// the format: ".json" for JSON, anything else YAML (of which JSON is a
// subset). It returns the rules, or a *slidegate.RulesError listing every
// problem, with name as its Source.
func Parse(name string, data []byte) (slidegate.Rules, error) {
	var r slidegate.Rules
	var err error
	if len(bytes.TrimSpace(data)) == 0 {
		// Refused rather than read as no rules: a file caught between its
		// truncation and its writing reads as empty, and must not clear the
		// rules in force.
		return slidegate.Rules{}, &slidegate.RulesError{Source: name, Problems: []slidegate.Problem{
			{Reason: "the file is empty; to clear the rules, write {} (JSON) or flow: [] (YAML)"}}}
	}
	if strings.EqualFold(filepath.Ext(name), ".json") {
		err = decodeJSON(data, &r)
	} else {
		err = decodeYAML(data, &r)
	}
	if err != nil {
		return slidegate.Rules{}, &slidegate.RulesError{Source: name, Problems: problemsOf(err)}
	}
	if err := r.Validate(); err != nil {
		var re *slidegate.RulesError
		if errors.As(err, &re) {
			re.Source = name
		}
		return slidegate.Rules{}, err
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

func decodeJSON(data []byte, r *slidegate.Rules) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(r); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line := 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n"))
			return fmt.Errorf("line %d: %v", line, err)
		}
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("data after the rules")
	}
	return nil
}

func decodeYAML(data []byte, r *slidegate.Rules) error {
	d := yaml.NewDecoder(bytes.NewReader(data))
	d.KnownFields(true)
	if err := d.Decode(r); err != nil && err != io.EOF {
		return err
	}
	return nil
}

// problemsOf turns a decoding error into problems: one per line of a YAML
// type error, which lists them all.
func problemsOf(err error) []slidegate.Problem {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		ps := make([]slidegate.Problem, len(te.Errors))
		for i, e := range te.Errors {
			ps[i] = slidegate.Problem{Reason: e}
		}
		return ps
	}
	return []slidegate.Problem{{Reason: strings.TrimPrefix(err.Error(), "yaml: ")}}
}
