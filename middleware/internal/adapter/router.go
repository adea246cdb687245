package adapter

import (
	"net/http"

	"github.com/slidegate/slidegate"
)

// Options are what the options of a router's adapter set (gin, echo): how
// a request's key is found from the router's context C, and which statuses
// count as failures.
type Options[C any] struct {
	Key     func(C) string // nil: every request has the key ""
	IsError func(status int) bool
}

// Build applies opts to the defaults: no key, 5xx statuses failing. A nil
// option is none.
func Build[C any, O ~func(*Options[C])](opts []O) Options[C] {
	o := Options[C]{IsError: ServerError}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// KeyFrom is the option that takes each request's key from f; a nil f
// gives every request the key "".
func KeyFrom[C any](f func(C) string) func(*Options[C]) {
	return func(o *Options[C]) { o.Key = f }
}

// WithIsError is the option that says which statuses are failures; a nil
// f keeps the one in force.
func WithIsError[C any](f func(status int) bool) func(*Options[C]) {
	return func(o *Options[C]) {
		if f != nil {
			o.IsError = f
		}
	}
}

// Enter enters r, served in the router's context c, into g as inbound
// traffic to resource, with its key. For a request the guard blocks, it
// sets the Retry-After header in h when the rule knows when to retry, and
// returns the status to answer with, and the guard's error.
func (o *Options[C]) Enter(g *slidegate.Guard, c C, r *http.Request, resource string, h http.Header) (e slidegate.Entry, status int, err error) {
	key := ""
	if o.Key != nil {
		key = o.Key(c)
	}
	e, err = Enter(g, r, resource, key, o.Key != nil)
	if err != nil {
		status, retryAfter := BlockedStatus(err)
		if retryAfter != "" {
			h.Set("Retry-After", retryAfter)
		}
		return e, status, err
	}
	return e, 0, nil
}
