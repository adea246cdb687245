package config

import (
	"errors"
	"fmt"
	"testing"
)

func TestEveryConfigurationErrorMatchesTheOneSentinel(t *testing.T) {
	wrapped := fmt.Errorf("%w: limit = -1: must be positive", Sentinel("breaker"))
	if !errors.Is(wrapped, ErrInvalid) {
		t.Errorf("%v does not match ErrInvalid", wrapped)
	}
	if got, want := wrapped.Error(), "breaker: invalid configuration: limit = -1: must be positive"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	e := &Error{Pkg: "flow", Field: "limit", Value: -1, Detail: "must be positive"}
	if !errors.Is(fmt.Errorf("rule x: %w", e), ErrInvalid) {
		t.Error("an Error does not match ErrInvalid")
	}
	if got, want := e.Error(), "flow: invalid configuration: limit = -1: must be positive"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if errors.Is(errors.New("breaker: invalid configuration"), ErrInvalid) {
		t.Error("an unrelated error with the same text matches ErrInvalid")
	}
}
