// Package blocked holds the one sentinel every refusal matches. Package
// flow exports it as ErrBlocked; package breaker's own ErrBlocked matches
// it too, so errors.Is(err, flow.ErrBlocked) holds for a request refused by
// any package.
package blocked

import "errors"

// Err is matched by every refusal of every package.
var Err = errors.New("slidegate: blocked")

// Sentinel returns a package's own sentinel for its refusals. It reads
// "<pkg>: blocked" and matches [Err]; Err does not match it.
func Sentinel(pkg string) error { return &sentinel{msg: pkg + ": blocked"} }

type sentinel struct{ msg string }

func (s *sentinel) Error() string        { return s.msg }
func (s *sentinel) Is(target error) bool { return target == Err }
