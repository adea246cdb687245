package ginguard

import (
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/httpguard"
	"github.com/slidegate/slidegate/middleware/internal/pause"
)

// An Option customises Middleware.
type Option func(*options)

type options struct {
	key     func(*gin.Context) string // nil: every request has the key ""
	isError func(status int) bool
}

// KeyFrom takes each request's key (slidegate.WithKey), which per-key rules
// limit on its own, from f: c.ClientIP() keys by the client's address as
// the engine's trusted proxies find it, c.GetHeader("X-Api-Key") by an API
// key. A nil f keeps every request's key "". The guard tells apart at most
// slidegate.MaxKeyLength bytes of a key.
func KeyFrom(f func(c *gin.Context) string) Option {
	return func(o *options) { o.key = f }
}

// WithIsError says which response statuses count as failures for the
// guard's statistics and breakers. The default is httpguard.ServerError
// (5xx); a nil f keeps it.
func WithIsError(f func(status int) bool) Option {
	return func(o *options) {
		if f != nil {
			o.isError = f
		}
	}
}

// Middleware returns gin middleware that guards the handlers after it with
// g (nil means slidegate.Default()). Each request enters the guard as
// inbound traffic (slidegate.Inbound) under its method (httpguard.Method)
// and its route, c.FullPath(): "GET /users/:id"; a request no route serves
// (an empty FullPath) is httpguard.NoRoute.
//
// A blocked request is aborted (Context.AbortWithStatus) with
// httpguard.BlockedStatus's status and Retry-After header, and reaches no
// handler after Middleware. An allowed one exits the guard when the
// handlers after it return: with an error if the status counts as one
// (WithIsError; 5xx by default), or if a handler attached an error with
// Context.Error other than a gin.ErrorTypeBind one to a response that is
// not a 4xx (a body that did not bind, a request refused with a 4xx, is the
// client's fault, and counting it would let clients open the breakers), or
// if a handler panicked, in which case the panic goes on
// after the exit.
func Middleware(g *slidegate.Guard, opts ...Option) gin.HandlerFunc {
	if g == nil {
		g = slidegate.Default()
	}
	o := options{isError: httpguard.ServerError}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return func(c *gin.Context) {
		r := c.Request
		var buf [2]slidegate.EntryOption // on the stack: Enter keeps none of them
		eo := append(buf[:0], slidegate.Inbound())
		if o.key != nil {
			eo = append(eo, slidegate.WithKey(o.key(c)))
		}
		e, err := g.Enter(r.Context(), httpguard.PatternResource(r, c.FullPath()), eo...)
		if err != nil {
			status, retryAfter := httpguard.BlockedStatus(err)
			if retryAfter != "" {
				c.Header("Retry-After", retryAfter)
			}
			c.AbortWithStatus(status)
			return
		}
		// The body's reads wait on the client: no response time.
		r.Body = pause.Wrap(r.Body, http.NoBody, e)
		defer func() {
			if v := recover(); v != nil {
				e.Exit(httpguard.PanicError(v))
				panic(v) // on the original stack, which is not unwound yet
			}
		}()
		c.Next()
		e.Exit(o.failure(c))
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
