package rulefile

import (
	"strconv"

	"github.com/slidegate/slidegate/internal/textcut"
)

// A rules file is read in two steps. Its format's reader (readYAML,
// readJSON) turns it into a tree of nodes that knows the line of every
// field and rule but nothing about rules; decode then walks that tree into a
// slidegate.Rules, judging every field on its own, so that one bad value
// hides nothing else and every problem gets its line. The tree is only as
// deep as a rules file is: the top-level mapping, its lists, their rules,
// and each rule's values as leaves that decode themselves.

// kind is what a node holds.
type kind uint8

const (
	null    kind = iota // nothing: "limit:" with no value, or null
	scalar              // a single value: text, a number, true or false
	list                // a YAML sequence or a JSON array
	mapping             // a YAML mapping or a JSON object: fields and their values
)

// A node is one value of a rules file and the line it starts on.
type node struct {
	kind kind
	line int
	// fields are a mapping's fields in file order, merged fields (YAML's
	// "<<") after the file's own; a name appears once.
	fields []field
	// items are a list's items.
	items []*node
	// text is a scalar's text without quotes, and isText whether the
	// format reads it as text (quoted, or YAML that is not a number, a
	// boolean or null) rather than as a number or a boolean.
	text   string
	isText bool
	// decode reads the node into the Go value dst points to by its
	// format's own rules (YAML's 0x10 and yes, JSON's strict types). It is
	// set on every node below a rule, and on the lists' items.
	decode func(dst any) error
	// twice finds, in a mapping below a rule (overrides), the first name
	// given twice: its name, its line and the line of its first. It is
	// nil where decode reports names given twice itself.
	twice func() (name string, line, first int, found bool)
}

// A field is a mapping's field: its name, the name's line and its value.
type field struct {
	name  string
	line  int
	value *node
}

// lookup returns the field called name, or nil.
func (n *node) lookup(name string) *field {
	for i := range n.fields {
		if n.fields[i].name == name {
			return &n.fields[i]
		}
	}
	return nil
}

// maxQuoted is the longest value a message quotes in full: a problem shows
// enough of a value to find it, never a whole file pasted into one line.
const maxQuoted = 40

// describe names the node's value in a message: "ten" in quotes when the
// file has it as text, 1.5 bare when a number, or what it is ("a list").
func describe(n *node) string {
	switch n.kind {
	case null:
		return "no value"
	case list:
		return "a list"
	case mapping:
		return "a group of fields"
	}
	s := textcut.Cut(n.text, maxQuoted)
	if n.isText {
		return strconv.Quote(s)
	}
	return s
}
