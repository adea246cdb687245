package echoguard

import (
	"net/http"
	"reflect"
	"sync"

	"github.com/labstack/echo/v4"
	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/httpguard"
	"github.com/slidegate/slidegate/middleware/internal/adapter"
)

// An Option customises [Middleware].
type Option func(*options)

type options = adapter.Options[echo.Context]

// KeyFrom takes each request's key ([slidegate.WithKey]), which per-key
// rules limit on its own, from f. c.RealIP() keys by the client's address,
// as the server's IPExtractor finds it.
// c.Request().Header.Get("X-Api-Key") keys by an API key. A nil f keeps
// every request's key "". The guard tells apart at most
// 256 bytes of a key.
func KeyFrom(f func(c echo.Context) string) Option { return Option(adapter.KeyFrom(f)) }

// WithIsError says which response statuses count as failures for the
// guard's statistics and breakers. The default counts 5xx. A nil f keeps
// it.
func WithIsError(f func(status int) bool) Option {
	return Option(adapter.WithIsError[echo.Context](f))
}

// Middleware returns echo middleware that guards the handler after it with
// g. A nil g means [slidegate.Default]. Each request enters the guard as
// inbound traffic ([slidegate.WithInbound]). Its name is its method
// ([httpguard.Method]) and its route, c.Path(), as in "GET /users/:id". A
// request that echo routes to its NotFoundHandler or
// MethodNotAllowedHandler is [httpguard.NoRoute].
//
// A blocked request reaches no handler after Middleware. Middleware sets
// the Retry-After header and returns an [*echo.HTTPError]. The error has
// [httpguard.BlockedStatus]'s status, the status's text as its message,
// and the guard's error as Internal.
//
// An allowed request exits the guard when the handler returns. It exits
// with an error if the response's status counts as one ([WithIsError], 5xx
// by default), or if the handler panicked. A panic goes on after the exit.
// A handler may return an error and write nothing. Its status is then the
// one echo's default error handler writes for the error: an
// *echo.HTTPError's code, or 500 for any other error.
//
// A handler that holds its request open, such as an event stream, can
// exit the guard early, as with [httpguard.Middleware]. The writer of its
// response, c.Response().Writer, has a method ExitGuard(). It exits with
// the status written so far. Find it with an interface assertion, through
// Unwrap, as the event streams of
// [github.com/slidegate/slidegate/dashboard] do:
//
//	c.Response().Writer.(interface{ ExitGuard() }).ExitGuard()
func Middleware(g *slidegate.Guard, opts ...Option) echo.MiddlewareFunc {
	if g == nil {
		g = slidegate.Default()
	}
	o := adapter.Build(opts)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			res := c.Response()
			e, status, err := o.Enter(g, c, r, resource(c), res.Header())
			if err != nil {
				return &echo.HTTPError{Code: status, Message: http.StatusText(status), Internal: err}
			}
			w := writers.Get().(*writer)
			*w = writer{ResponseWriter: res.Writer, e: e, c: c, o: &o}
			res.Writer = w
			adapter.Serve(e, r, func() { err = next(c) }, func() error { return failure(&o, c, err) })
			res.Writer = w.ResponseWriter
			*w = writer{}
			writers.Put(w)
			return err
		}
	}
}

// A writer is the writer of the response the handler after Middleware
// writes (echo.Response.Writer), with ExitGuard. Writers are pooled: a
// request costs none.
type writer struct {
	http.ResponseWriter
	e slidegate.Entry
	c echo.Context
	o *options
}

var writers = sync.Pool{New: func() any { return new(writer) }}

// ExitGuard exits the request's entry now, with the status written so far.
// Middleware exits no entry twice.
func (w *writer) ExitGuard() { w.e.Exit(failure(w.o, w.c, nil)) }

// Unwrap returns the writer it wraps, for http.ResponseController.
func (w *writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// failure is the error the request that c served ends with, its handler
// having returned err, or nil.
func failure(o *options, c echo.Context, err error) error {
	if status := responseStatus(c, err); o.IsError(status) {
		return &httpguard.StatusError{Status: status}
	}
	return nil
}

// resource names the request c routed. Echo names a request it found no
// route for by the nearest node of its tree, a path of no route, so those
// are told apart by their handler: echo's own for 404 and 405.
func resource(c echo.Context) string {
	if h := reflect.ValueOf(c.Handler()).Pointer(); h == reflect.ValueOf(echo.NotFoundHandler).Pointer() ||
		h == reflect.ValueOf(echo.MethodNotAllowedHandler).Pointer() {
		return httpguard.NoRoute
	}
	return adapter.PatternResource(c.Request(), c.Path())
}

// responseStatus is the status of the response to c's request, after its
// handler returned err: the one written, or the one echo's default error
// handler will write for err.
func responseStatus(c echo.Context, err error) int {
	res := c.Response()
	if res.Committed || err == nil {
		return res.Status
	}
	if he, ok := err.(*echo.HTTPError); ok {
		if inner, ok := he.Internal.(*echo.HTTPError); ok {
			return inner.Code
		}
		return he.Code
	}
	return http.StatusInternalServerError
}
