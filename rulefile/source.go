package rulefile

import (
	"context"

	"github.com/slidegate/slidegate"
)

// A Source is where a guard's rules come from: a file ([File]), a key in a
// configuration service (etcd, Consul, Nacos, Apollo), a Kubernetes
// object. [Follow] puts a source's rules in force in a guard and keeps them
// in step with it. The source only says what its rules are and when they
// may have changed. Follow does the rest: it validates, keeps the rules in
// force when new ones are refused, and reads again a source that cannot be
// read. It also logs, and keeps the last good rules on disk.
//
// A Source that is also a [fmt.Stringer] is named by its String in logs
// and errors, such as "rules.yaml" or "etcd:/slidegate/rules".
type Source interface {
	// Rules reads the source's rules as they are now. For rules with a
	// problem it returns a *slidegate.RulesError listing every problem,
	// as Parse does. A source that cannot be read now, its server down or
	// a file missing, returns another error. Follow then tries again
	// later. Rules must return once ctx is done.
	Rules(ctx context.Context) (slidegate.Rules, error)
	// Changes returns a channel that receives a value whenever the rules
	// may have changed since they were last read. Close closes it. A
	// source that stops for good closes it earlier. Follow then logs it
	// and stops, keeping the rules in force. A source sends without
	// blocking on a channel with a buffer of one, so that changes in a
	// burst make one read. A change is never lost, for the read it causes
	// comes after it. Changes returns the same channel every time.
	Changes() <-chan struct{}
	// Close stops the source and closes the Changes channel. It is safe to
	// call more than once.
	Close() error
}
