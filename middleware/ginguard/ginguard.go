package ginguard

import (
	"net/http"
	"sync"

	"github.com/gin-gonic/gin"
	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/httpguard"
	"github.com/slidegate/slidegate/middleware/internal/adapter"
)

// An Option customises [Middleware].
type Option func(*options)

type options = adapter.Options[*gin.Context]

// KeyFrom takes each request's key ([slidegate.WithKey]), which per-key
// rules limit on its own, from f. c.ClientIP() keys by the client's
// address, as the engine's trusted proxies find it. c.GetHeader("X-Api-Key")
// keys by an API key. A nil f keeps every request's key "". The guard
// tells apart at most 256 bytes of a key.
func KeyFrom(f func(c *gin.Context) string) Option { return Option(adapter.KeyFrom(f)) }

// WithIsError says which response statuses count as failures for the
// guard's statistics and breakers. The default counts 5xx. A nil f keeps
// it.
func WithIsError(f func(status int) bool) Option {
	return Option(adapter.WithIsError[*gin.Context](f))
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
//
// A handler that holds its request open, such as an event stream, can
// exit the guard early, as with [httpguard.Middleware]. The handlers'
// c.Writer has a method ExitGuard(). It exits with the status written so
// far. Find it with an interface assertion:
//
//	c.Writer.(interface{ ExitGuard() }).ExitGuard()
func Middleware(g *slidegate.Guard, opts ...Option) gin.HandlerFunc {
	if g == nil {
		g = slidegate.Default()
	}
	o := adapter.Build(opts)
	return func(c *gin.Context) {
		r := c.Request
		e, status, err := o.Enter(g, c, r, adapter.PatternResource(r, c.FullPath()), c.Writer.Header())
		if err != nil {
			c.AbortWithStatus(status)
			return
		}
		w := writers.Get().(*writer)
		*w = writer{ResponseWriter: c.Writer, e: e, c: c, o: &o}
		c.Writer = w
		adapter.Serve(e, r, c.Next, func() error { return failure(&o, c) })
		c.Writer = w.ResponseWriter
		*w = writer{}
		writers.Put(w)
	}
}

// A writer is the c.Writer of the handlers after Middleware: gin's, with
// ExitGuard. Writers are pooled: a request costs none.
type writer struct {
	gin.ResponseWriter
	e slidegate.Entry
	c *gin.Context
	o *options
}

var writers = sync.Pool{New: func() any { return new(writer) }}

// ExitGuard exits the request's entry now, with the failure the request
// would end with now. Middleware exits no entry twice.
func (w *writer) ExitGuard() { w.e.Exit(failure(w.o, w.c)) }

// Unwrap returns gin's writer, for http.ResponseController.
func (w *writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// failure is the error the request that c served ends with, or nil.
func failure(o *options, c *gin.Context) error {
	status := c.Writer.Status()
	if o.IsError(status) {
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
