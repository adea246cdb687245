package slidegate

import "context"

// What the overload rules (rule_shed.go, rule_adaptive.go) share.

// shareOf is whom an entry's request counts for in an overload rule that
// shares its limit by key or by resource.
func shareOf(e *entry, byKey bool) string {
	if byKey {
		return e.key
	}
	return e.res.name
}

// IsOverloaded reports whether err says that a request failed for want of
// capacity: a signal for an adaptive rule to back off. That is err is, or
// wraps, [context.DeadlineExceeded], or an error whose method Overloaded()
// bool says true. httpguard.StatusError says so for 429 and 503.
func IsOverloaded(err error) bool {
	// errors.As with an interface target would allocate on every failed
	// request; the tree is walked here instead, as errors.Is walks it,
	// asking Is methods too (net/http's client timeout says it is
	// context.DeadlineExceeded that way).
	for err != nil {
		if err == context.DeadlineExceeded {
			return true
		}
		if x, ok := err.(interface{ Is(error) bool }); ok && x.Is(context.DeadlineExceeded) {
			return true
		}
		if o, ok := err.(interface{ Overloaded() bool }); ok && o.Overloaded() {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if IsOverloaded(e) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}
