package ginguard

import (
	"github.com/gin-gonic/gin"
	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/httpguard"
	"github.com/slidegate/slidegate/middleware/internal/adapter"
)

// An Option customises [Middleware].
type Option func(*options)

type options struct {
	key     func(*gin.Context) string // nil: every request has the key ""
	isError func(status int) bool
}

// KeyFrom takes each request's key ([slidegate.WithKey]), which per-key
// rules limit on its own, from f. c.ClientIP() keys by the client's
// address, as the engine's trusted proxies find it. c.GetHeader("X-Api-Key")
// keys by an API key. A nil f keeps every request's key "". The guard
// tells apart at most 256 bytes of a key.
func KeyFrom(f func(c *gin.Context) string) Option {
	return func(o *options) { o.key = f }
}

// WithIsError says which response statuses count as failures for the
// guard's statistics and breakers. The default counts 5xx. A nil f keeps
// it.
func WithIsError(f func(status int) bool) Option {
	return func(o *options) {
		if f != nil {
			o.isError = f
		}
	}
}

// Middleware returns gin middleware that guards the handlers after it with
// g. A nil g means [slidegate.Default]. Each request enters the guard as
// inbound traffic ([slidegate.WithInbound]). Its name is its method
// ([httpguard.Method]) and its route, c.FullPath(), as in
// "GET /users/:id". A request no route serves, with an empty FullPath, is
// [httpguard.NoRoute].
//
// A blocked request is aborted (Context.AbortWithStatus) with
// [httpguard.BlockedStatus]'s status and Retry-After header. It reaches no
// handler after Middleware. An allowed one exits the guard when the
// handlers after it return. It exits with an error in three cases:
//
//   - The status counts as one ([WithIsError], 5xx by default).
//   - A handler attached an error with Context.Error, unless it is excused.
//   - A handler panicked. The panic goes on after the exit.
//
// An error of type gin.ErrorTypeBind is excused, and so is any error on a
// 4xx response. A body that did not bind, or a request refused with a 4xx,
// is the client's fault. Counting it would let clients open the breakers.
func Middleware(g *slidegate.Guard, opts ...Option) gin.HandlerFunc {
	if g == nil {
		g = slidegate.Default()
	}
	o := options{isError: adapter.ServerError}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return func(c *gin.Context) {
		r := c.Request
		key := ""
		if o.key != nil {
			key = o.key(c)
		}
		e, err := adapter.Enter(g, r, adapter.PatternResource(r, c.FullPath()), key, o.key != nil)
		if err != nil {
			status, retryAfter := adapter.BlockedStatus(err)
			if retryAfter != "" {
				c.Header("Retry-After", retryAfter)
			}
			c.AbortWithStatus(status)
			return
		}
		adapter.Serve(e, r, c.Next, func() error { return o.failure(c) })
	}
}

// failure is the error the request that c served ends with, or nil.
func (o *options) failure(c *gin.Context) error {
	status := c.Writer.Status()
	if o.isError(status) {
		return &httpguard.StatusError{Status: status}
	}
	if status >= 400 && status < 500 {
		// The client's fault, whatever error a handler attached to it
		// (c.AbortWithError(400, err) after a body that did not bind):
		// counted, it would let clients open the breakers.
		return nil
	}
	for i := len(c.Errors) - 1; i >= 0; i-- {
		if err := c.Errors[i]; err.Type != gin.ErrorTypeBind {
			return err
		}
	}
	return nil
}
