package rulefile

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/internal/rulekind"
)

// A listKind is one of the lists of a rules file ("flow", "breakers"), and
// the fields of its rules, as read from slidegate.Rules' yaml tags so that
// a field added there is read here without a word changed.
type listKind struct {
	name   string       // the list's name in a file: "flow"
	noun   string       // what one of its rules is called: "flow rule"
	index  int          // the list's field in slidegate.Rules
	typ    reflect.Type // a rule's type: slidegate.FlowRule
	fields []ruleField
}

// A ruleField is one field of a rule.
type ruleField struct {
	name     string // as files name it: "max_wait"
	index    int
	typ      reflect.Type
	required bool // its tag has no omitempty: a file must give it
}

var (
	durationType = reflect.TypeFor[slidegate.Duration]()
	lists        = listKinds()
)

// topSetting returns the index in slidegate.Rules of the setting (a field
// that is not a list of rules, such as shadow) that files call name.
func topSetting(name string) (int, bool) {
	rt := reflect.TypeFor[slidegate.Rules]()
	for i := range rt.NumField() {
		if n, _ := tagName(rt.Field(i)); n == name && rt.Field(i).Type.Kind() != reflect.Slice {
			return i, true
		}
	}
	return 0, false
}

// nouns name a rule of each list in messages.
var nouns = map[string]string{"flow": "flow rule", "breakers": "breaker"}

// missingHints say what to write for a required field a rule leaves out.
var missingHints = map[string]string{"limit": "write limit: 0 to block every request"}

func listKinds() []*listKind {
	var ks []*listKind
	rt := reflect.TypeFor[slidegate.Rules]()
	for i := range rt.NumField() {
		f := rt.Field(i)
		name, _ := tagName(f)
		if name == "" || f.Type.Kind() != reflect.Slice {
			continue
		}
		k := &listKind{name: name, noun: cmp.Or(nouns[name], name), index: i, typ: f.Type.Elem()}
		for j := range k.typ.NumField() {
			rf := k.typ.Field(j)
			if n, omitempty := tagName(rf); n != "" {
				k.fields = append(k.fields, ruleField{name: n, index: j, typ: rf.Type, required: !omitempty})
			}
		}
		ks = append(ks, k)
	}
	return ks
}

// tagName returns the name a struct field has in files and whether it may
// be left out.
func tagName(f reflect.StructField) (name string, omitempty bool) {
	tag, ok := f.Tag.Lookup("yaml")
	if !ok || !f.IsExported() {
		return "", false
	}
	name, opts, _ := strings.Cut(tag, ",")
	if name == "-" {
		return "", false
	}
	return name, strings.Contains(","+opts+",", ",omitempty,")
}

func (k *listKind) field(name string) *ruleField {
	for i := range k.fields {
		if k.fields[i].name == name {
			return &k.fields[i]
		}
	}
	return nil
}

func (k *listKind) names() []string {
	ns := make([]string, len(k.fields))
	for i, f := range k.fields {
		ns[i] = f.name
	}
	return ns
}

func listNamed(name string) *listKind {
	for _, k := range lists {
		if k.name == name {
			return k
		}
	}
	return nil
}

// A decoder turns a tree into rules, judging every field on its own and
// remembering which rules and fields it found wrong, so that the problems
// Rules.Validate then finds in the zero values left in their place are not
// reported a second time.
type decoder struct {
	json     bool
	problems []slidegate.Problem
	rules    map[string]*node   // "flow[2]" → its rule's node
	broken   map[string]bool    // rules that are not rules at all
	faulty   map[string]bool    // rules with a field found wrong
	fields   map[[2]string]bool // {rule, field} found wrong, or meant by a misspelt name
}

// decode reads the rules of root, then validates them, and returns them with
// every problem found, each on its line.
func decode(root *node, isJSON bool) (slidegate.Rules, []slidegate.Problem) {
	d := &decoder{json: isJSON, rules: map[string]*node{}, broken: map[string]bool{}, faulty: map[string]bool{}, fields: map[[2]string]bool{}}
	var r slidegate.Rules
	d.top(root, reflect.ValueOf(&r).Elem())
	if err := r.Validate(); err != nil {
		var re *slidegate.RulesError
		if !errors.As(err, &re) {
			re = &slidegate.RulesError{Problems: []slidegate.Problem{{Reason: err.Error()}}}
		}
		for _, p := range re.Problems {
			switch {
			case d.broken[p.Rule], p.Field != "" && d.fields[[2]string{p.Rule, p.Field}], p.Field == "" && d.faulty[p.Rule]:
				continue // a consequence of a problem reported already
			}
			p.Line = d.lineOf(p.Rule, p.Field)
			d.problems = append(d.problems, p)
		}
	}
	d.requireFields(r)
	return r, d.problems
}

func (d *decoder) add(p slidegate.Problem) {
	if p.Rule != "" {
		d.faulty[p.Rule] = true
		if p.Field != "" {
			d.fields[[2]string{p.Rule, p.Field}] = true
		}
	}
	d.problems = append(d.problems, p)
}

// top reads the document's top level: a group of fields, each a list.
func (d *decoder) top(root *node, rv reflect.Value) {
	switch root.kind {
	case null:
		d.add(slidegate.Problem{Line: root.line, Reason: "the file has no rules; to clear the rules, write " + d.clear()})
		return
	case mapping:
	default:
		d.add(slidegate.Problem{Line: root.line, Reason: fmt.Sprintf("the file holds %s, not rules: a rules file is a group of fields with the lists %s", describe(root), d.listNames())})
		return
	}
	seen := map[string]int{}
	settings, lists := 0, 0
	defer func() {
		// A file cut short after a setting (shadow: true) must not clear
		// the rules in force, any more than an empty one.
		if settings > 0 && lists == 0 {
			d.add(slidegate.Problem{Line: root.line, Reason: "the file has settings but no rules; to clear the rules, write " + d.clear()})
		}
	}()
	for _, f := range root.fields {
		if first, dup := seen[f.name]; dup {
			d.add(slidegate.Problem{Line: f.line, Field: f.name, Reason: fmt.Sprintf("given again (first on line %d): each list appears once", first)})
			continue
		}
		seen[f.name] = f.line
		k := listNamed(f.name)
		if k == nil {
			if i, ok := topSetting(f.name); ok {
				// A setting of the whole set of rules (shadow: true).
				settings++
				if msg := d.set(rv.Field(i), rv.Field(i).Type(), f.value); msg != "" {
					d.add(slidegate.Problem{Line: f.line, Field: f.name, Reason: msg})
				}
				continue
			}
			d.add(slidegate.Problem{Line: f.line, Reason: d.unknownTop(f.name)})
			continue
		}
		lists++
		v := f.value
		switch v.kind {
		case null:
			// Refused rather than read as no rules: a file cut short just
			// after "flow:" must not clear the rules in force.
			d.add(slidegate.Problem{Line: f.line, Field: f.name, Reason: fmt.Sprintf("no rules under it: write %s for none", d.emptyList(f.name))})
			continue
		case list:
		default:
			d.add(slidegate.Problem{Line: v.line, Field: f.name, Reason: describe(v) + " is not a list of rules: " + d.listHint(f.name)})
			continue
		}
		lv := rv.Field(k.index)
		for i, item := range v.items {
			lv.Set(reflect.Append(lv, d.rule(k, i, item)))
		}
	}
}

// rule reads item, rule i of list k. It always returns a rule, so that the
// rules after it keep their places ("flow[3]").
func (d *decoder) rule(k *listKind, i int, item *node) reflect.Value {
	name := k.name + "[" + strconv.Itoa(i) + "]"
	rv := reflect.New(k.typ).Elem()
	if item.kind != mapping {
		d.broken[name] = true
		d.add(slidegate.Problem{Rule: name, Line: item.line,
			Reason: fmt.Sprintf("%s is not a %s: a rule is a group of fields, such as %s", describe(item), k.noun, d.example(k))})
		return rv
	}
	d.rules[name] = item
	var resource string
	if f := item.lookup("resource"); f != nil && f.value.kind == scalar {
		resource = f.value.text
	}
	seen := map[string]int{}
	for _, f := range item.fields {
		p := slidegate.Problem{Rule: name, Resource: resource, Line: f.line}
		if f.name == "" {
			p.Reason = "a field's name must be text"
			d.add(p)
			continue
		}
		if first, dup := seen[f.name]; dup {
			p.Field, p.Reason = f.name, fmt.Sprintf("given again (first on line %d): a field appears once in a rule", first)
			d.add(p)
			continue
		}
		seen[f.name] = f.line
		rf := k.field(f.name)
		if rf == nil {
			p.Reason = unknownField(f.name, k)
			d.add(p)
			if s := suggest(f.name, k.names()); s != "" {
				// "limt: 10" says all there is to say about the limit:
				// that it is missing, or 0, would be said twice.
				d.fields[[2]string{name, s}] = true
			}
			continue
		}
		if reason := d.set(rv.Field(rf.index), rf.typ, f.value); reason != "" {
			p.Field, p.Reason = rf.name, reason
			d.add(p)
		}
	}
	return rv
}

// set reads v into dst, of type t, and returns "" or what is wrong with v.
func (d *decoder) set(dst reflect.Value, t reflect.Type, v *node) string {
	if v.kind == null {
		return "no value: give one, or leave the field out"
	}
	switch {
	case t == durationType:
		return setDuration(dst, v)
	case t.Kind() == reflect.Map:
		// Overrides: keys and their limits, which the format decodes;
		// Validate judges the keys and the limits.
		p := reflect.New(t)
		if v.kind != mapping {
			return describe(v) + " is not a group of keys and their limits, such as {tenant-a: 500}"
		}
		if v.twice != nil {
			// Refused, as YAML would: the last limit would win without a word.
			if name, line, first, found := v.twice(); found {
				return fmt.Sprintf("%s given again on line %d (first on line %d): a key has one limit", quoteName(name), line, first)
			}
		}
		if err := v.decode(p.Interface()); err != nil {
			msg := err.Error() // YAML's lists its errors after a first line
			msg = strings.TrimSpace(msg[strings.LastIndexByte(msg, '\n')+1:])
			return "not keys each with a whole number for its limit, such as {tenant-a: 500}: " + msg
		}
		dst.Set(p.Elem())
		return ""
	case t.Kind() == reflect.Pointer:
		p := reflect.New(t.Elem())
		if reason := d.set(p.Elem(), t.Elem(), v); reason != "" {
			return reason
		}
		dst.Set(p)
		return ""
	}
	p := reflect.New(t)
	if v.kind != scalar || v.decode(p.Interface()) != nil {
		return d.wrongType(t, v)
	}
	if p.Elem().CanInt() && !v.isText {
		// YAML reads 1.5 into a whole number as 1: a value that is not
		// whole must not lose its fraction without a word.
		var f float64
		if v.decode(&f) == nil && f != math.Trunc(f) {
			return describe(v) + " is not a whole number"
		}
	}
	dst.Set(p.Elem())
	return ""
}

// setDuration reads a duration written as time.ParseDuration reads it. A
// bare number other than 0 is refused: its unit would be a guess.
func setDuration(dst reflect.Value, v *node) string {
	if v.kind != scalar {
		return describe(v) + " is not a duration: write it as 500ms, 2s or 1m30s"
	}
	if !v.isText && v.text != "0" {
		return describe(v) + " has no unit: write it as 500ms, 2s or 1m30s"
	}
	dur, err := time.ParseDuration(strings.TrimSpace(v.text))
	if err != nil {
		return describe(v) + " is not a duration: write it as 500ms, 2s or 1m30s"
	}
	dst.SetInt(int64(dur))
	return ""
}

// wrongType says why v is not a value of type t.
func (d *decoder) wrongType(t reflect.Type, v *node) string {
	what := describe(v)
	var want string
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if _, err := strconv.ParseInt(v.text, 10, 64); v.kind == scalar && !v.isText && err != nil && err.(*strconv.NumError).Err == strconv.ErrRange {
			return what + " is out of range for a whole number"
		}
		want = "a whole number"
		if _, err := strconv.ParseInt(strings.TrimSpace(v.text), 10, 64); v.isText && err == nil {
			return fmt.Sprintf("%s is text in quotes, not a whole number: write %s without quotes", what, strings.TrimSpace(v.text))
		}
	case reflect.Float32, reflect.Float64:
		want = "a number"
		if _, err := strconv.ParseFloat(strings.TrimSpace(v.text), 64); v.isText && err == nil {
			return fmt.Sprintf("%s is text in quotes, not a number: write %s without quotes", what, strings.TrimSpace(v.text))
		}
	case reflect.Bool:
		want = "true or false"
	case reflect.String:
		if d.json && v.kind == scalar {
			return what + " is not text: put it in double quotes"
		}
		want = "text"
	default:
		want = "a " + t.Kind().String()
	}
	return what + " is not " + want
}

// requireFields reports the required fields (those whose tag has no
// omitempty) that a rule leaves out, where Validate has not already: a
// file cut short after a rule's first line must not put in force a rule
// whose limit is 0 because the rest of it never arrived.
func (d *decoder) requireFields(r slidegate.Rules) {
	rv := reflect.ValueOf(r)
	for _, k := range lists {
		for i := range rv.Field(k.index).Len() {
			name := k.name + "[" + strconv.Itoa(i) + "]"
			n := d.rules[name]
			if n == nil {
				continue
			}
			rule := rv.Field(k.index).Index(i).Interface()
			for _, rf := range k.fields {
				if !rf.required || n.lookup(rf.name) != nil || d.fields[[2]string{name, rf.name}] || d.reported(name, rf.name) || optional(rule, rf.name) {
					continue
				}
				reason := "missing"
				if h := missingHints[rf.name]; h != "" {
					reason += ": " + h
				}
				var resource string
				if f := n.lookup("resource"); f != nil && f.value.kind == scalar {
					resource = f.value.text
				}
				d.add(slidegate.Problem{Rule: name, Resource: resource, Field: rf.name, Reason: reason, Line: n.line})
			}
		}
	}
}

// optional reports whether rule may leave out field although its tag makes
// it required: a rule that learns its limit (a shed rule has none, an
// adaptive rule's is only where it starts) may leave out its limit, so
// that no rule cut short puts in force a limit that blocks every request.
func optional(rule any, field string) bool {
	f, ok := rule.(slidegate.FlowRule)
	return ok && field == "limit" && rulekind.Of(string(f.Type)).Learnt
}

func (d *decoder) reported(rule, field string) bool {
	return slices.ContainsFunc(d.problems, func(p slidegate.Problem) bool { return p.Rule == rule && p.Field == field })
}

// lineOf returns the line of field in rule: its name's line, or the rule's
// line when the field is not in the file, or 0 when rule is not a rule.
func (d *decoder) lineOf(rule, fieldName string) int {
	n := d.rules[rule]
	if n == nil {
		return 0
	}
	if f := n.lookup(fieldName); f != nil && fieldName != "" {
		return f.line
	}
	return n.line
}

// unknownField says that a rule of kind k has no field called name, and
// what was meant if it is a near miss or another kind's field.
func unknownField(name string, k *listKind) string {
	msg := "unknown field " + quoteName(name)
	if s := suggest(name, k.names()); s != "" {
		return msg + ` (did you mean "` + s + `"?)`
	}
	for _, other := range lists {
		if other != k && other.field(name) != nil {
			return fmt.Sprintf("%s: that is a %s's field, and this is a %s", msg, other.noun, k.noun)
		}
	}
	return msg
}

// unknownTop says that the top level has no field called name.
func (d *decoder) unknownTop(name string) string {
	names := make([]string, len(lists))
	for i, k := range lists {
		names[i] = k.name
	}
	msg := "unknown field " + quoteName(name)
	if s := suggest(name, names); s != "" {
		return msg + ` (did you mean "` + s + `"?)`
	}
	for _, k := range lists {
		if k.field(name) != nil {
			return msg + ": a rule's fields go in a rule, in one of the lists " + d.listNames()
		}
	}
	return msg + ": a rules file has the lists " + d.listNames()
}

func (d *decoder) listNames() string {
	var b strings.Builder
	for i, k := range lists {
		if i > 0 {
			b.WriteString(" and ")
		}
		if d.json {
			b.WriteString(`"` + k.name + `"`)
		} else {
			b.WriteString(k.name + ":")
		}
	}
	return b.String()
}

// example names the fields a rule of kind k must have: "resource: and
// limit:".
func (d *decoder) example(k *listKind) string {
	var names []string
	for _, f := range k.fields {
		if f.required {
			if d.json {
				names = append(names, `"`+f.name+`"`)
			} else {
				names = append(names, f.name+":")
			}
		}
	}
	return strings.Join(names, " and ")
}

func (d *decoder) clear() string {
	if d.json {
		return "{}"
	}
	return "flow: []"
}

func (d *decoder) emptyList(name string) string {
	if d.json {
		return `"` + name + `": []`
	}
	return name + ": []"
}

func (d *decoder) listHint(name string) string {
	if d.json {
		return `write "` + name + `": [{...}, {...}]`
	}
	return `start each rule on a line of its own with "- "`
}

// quoteName quotes a field's name for a message, cut short if long.
func quoteName(name string) string {
	return describe(&node{kind: scalar, text: name, isText: true})
}

// suggest returns the name in known that name is most likely a misspelling
// of, or "": the same name but for case, "_" and "-" ("maxWait"), or one
// within an edit distance of a third of its length ("limt", "intervl").
func suggest(name string, known []string) string {
	if len(name) > 64 {
		return ""
	}
	norm := func(s string) string {
		return strings.NewReplacer("_", "", "-", "", " ", "").Replace(strings.ToLower(s))
	}
	best, bestDist := "", 0
	for _, k := range known {
		if norm(k) == norm(name) {
			return k
		}
		if dist := editDistance(strings.ToLower(name), k); dist <= max(1, len(k)/3) && (best == "" || dist < bestDist) {
			best, bestDist = k, dist
		}
	}
	return best
}

// editDistance is the number of edits that turn a into b, in bytes: a byte
// inserted, deleted or replaced, or two neighbours swapped ("flwo").
func editDistance(a, b string) int {
	// rows[i%3][j] is the distance between a[:i] and b[:j].
	var rows [3][]int
	for i := range rows {
		rows[i] = make([]int, len(b)+1)
	}
	for j := range rows[0] {
		rows[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur, prev, prev2 := rows[i%3], rows[(i-1)%3], rows[(i+1)%3]
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
	}
	return rows[len(a)%3][len(b)]
}
