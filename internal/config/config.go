// Package config holds the one error every package of the module returns
// for a bad setting. Package slidegate exports [ErrInvalid] as
// ErrInvalidConfig, so errors.Is(err, slidegate.ErrInvalidConfig) holds
// for a bad setting given to any package.
package config

import (
	"errors"
	"fmt"
)

// ErrInvalid is matched by every configuration error of every package.
var ErrInvalid = errors.New("invalid configuration")

// Sentinel returns the error a package wraps in its configuration errors.
// It reads "<pkg>: invalid configuration" and matches [ErrInvalid].
func Sentinel(pkg string) error { return &sentinel{msg: pkg + ": invalid configuration"} }

// sentinel is a package's own name for ErrInvalid.
type sentinel struct{ msg string }

func (s *sentinel) Error() string        { return s.msg }
func (s *sentinel) Is(target error) bool { return target == ErrInvalid }

// An Error names the setting that is wrong, the value it was given and
// what is wrong with it. It matches [ErrInvalid]. Its message reads
// "flow: invalid configuration: limit = -1: must be between 0 and 4294967295".
type Error struct {
	// Pkg is the package that judged the setting ("flow").
	Pkg string
	// Field names the setting as a rules file spells it ("limit"), or the
	// option that set it.
	Field string
	// Value is the value given.
	Value any
	// Detail says what is wrong with the value, in lower case.
	Detail string
}

// Error returns the package, the setting, its value and what is wrong.
func (e *Error) Error() string {
	return fmt.Sprintf("%s: invalid configuration: %s = %v: %s", e.Pkg, e.Field, e.Value, e.Detail)
}

// Unwrap returns [ErrInvalid].
func (e *Error) Unwrap() error { return ErrInvalid }
