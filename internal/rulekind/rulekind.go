// Package rulekind says what each kind of flow rule is, for the packages
// that read or show rules without enforcing them: the rules reader, the
// metrics, OpenTelemetry and the dashboard. The guard's package describes
// each kind once, beside the enforcer it makes, and registers here what
// those packages need to know of it when it is initialized, before any
// importer runs.
package rulekind

// A Kind is what a kind of flow rule is, as a reader or an exporter of
// rules needs to know it.
type Kind struct {
	// Name is the rule's type as files write it: "qps", "shed".
	Name string
	// Learnt says the rule learns its limit from the traffic. Its Limit
	// is at most where it starts: a rules reader lets a rule leave it
	// out, and an exporter shows the limit the rule has learnt (its
	// overload status), not its Limit.
	Learnt bool
	// Sheds says the rule reads the CPU and sheds while it is high: its
	// status says whether it sheds, and the CPU it read.
	Sheds bool
	// Baseline says the rule judges queueing by the least response time
	// it has seen, which its status gives.
	Baseline bool
	// TopKeys says the local per-key rules of the kind track their
	// busiest keys, which the guard shows.
	TopKeys bool
}

var (
	kinds = map[string]Kind{}
	first string // the kind of a rule whose type is empty
)

// Register adds k. The first kind registered is the kind of a rule that
// leaves its type out.
func Register(k Kind) {
	if len(kinds) == 0 {
		first = k.Name
	}
	kinds[k.Name] = k
}

// Of returns the kind of a rule of type typ: the first kind registered
// for "", the zero Kind for a type that no kind has.
func Of(typ string) Kind {
	if typ == "" {
		typ = first
	}
	return kinds[typ]
}
