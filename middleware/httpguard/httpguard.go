package httpguard

import (
	"bufio"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"sync/atomic"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/internal/adapter"
	"github.com/slidegate/slidegate/middleware/internal/pause"
)

// An Option customises [Middleware] or [Transport].
type Option func(*options)

type options struct {
	resource func(*http.Request) string
	blocked  func(http.ResponseWriter, *http.Request, error)
	isError  func(status int) bool
	entry    func(*http.Request) []slidegate.EntryOption
	key      func(*http.Request) string                    // nil: every request has the key ""
	retry    *retrier                                      // nil: Transport sends each request once
	route    func(*http.Request) (pattern string, ok bool) // nil: Middleware routes by next if it is a mux
	logger   *slog.Logger                                  // nil: slog.Default() when it is needed
}

// WithResource names the resource a request enters. The default is
// [RouteResource] for [Middleware], and the method and host for
// [Transport]. A
// nil f keeps it.
//
// Names are resources, with statistics, metrics series and dashboard rows
// of their own. Never build one from what a client sends, such as a raw
// path with IDs in it, a header, or a method outside the standard set (see
// [Method]). The guard bounds what such names cost
// ([slidegate.WithMaxResources], 256). But a client
// that makes new ones fills its table. The routes that come after them are
// then counted together as [slidegate.OtherResource].
func WithResource(f func(*http.Request) string) Option {
	return func(o *options) {
		if f != nil {
			o.resource = f
		}
	}
}

// WithBlockedHandler replaces Middleware's response to a request that the
// guard blocked. err is a [*slidegate.BlockError], or the request context's
// error if it ended while a throttle made the request wait. The default is
// [WriteBlocked]. A nil f keeps it.
func WithBlockedHandler(f func(w http.ResponseWriter, r *http.Request, err error)) Option {
	return func(o *options) {
		if f != nil {
			o.blocked = f
		}
	}
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

// WithEntryOptions gives each request's Enter more options, such as a
// batch count, or a priority ([slidegate.WithPriority]) for some requests.
// A nil f gives none. A [slidegate.WithKey] among them wins over the key
// option ([KeyFrom], [KeyFromHeader], [KeyFromClient]). The slice f
// returns is read, never written to. So f may return the same slice to
// every request.
func WithEntryOptions(f func(*http.Request) []slidegate.EntryOption) Option {
	return func(o *options) { o.entry = f }
}

// WithMux gives [Middleware] the mux that routes the requests it guards.
// Middleware then names each request by its route (see [RouteResource])
// when it is not placed directly around the mux. With other middleware
// between them, the mux sets the pattern on the request it routes.
// Middleware has entered the guard before, so it never sees that pattern.
// Instead it asks mux for each request's pattern
// ([http.ServeMux.Handler]) before next runs.
//
// WithMux is [WithRoute] with mux's routes. [WithResource] wins over it. A
// nil mux keeps the option in force. [Transport] ignores it.
func WithMux(mux *http.ServeMux) Option {
	if mux == nil {
		return nil
	}
	return WithRoute(func(r *http.Request) (string, bool) { return muxPattern(mux, r), true })
}

// redirectType is the type of the handler a ServeMux routes a request to
// when it redirects it (to the path with a slash after it, or cleaned).
var redirectType = reflect.TypeOf(http.RedirectHandler("/", http.StatusMovedPermanently))

// muxPattern returns the pattern of the route of mux that will serve r, or
// "" if none will. A request mux redirects is served by no route: for it,
// ServeMux.Handler returns the path it redirects to, which the client
// chose ("/users/anything/" for a pattern "/users/{id}/"), not a pattern.
func muxPattern(mux *http.ServeMux, r *http.Request) string {
	h, pattern := mux.Handler(r)
	if reflect.TypeOf(h) == redirectType {
		return ""
	}
	return pattern
}

// WithRoute gives [Middleware] the router that routes the requests it
// guards. route returns the pattern of the route that will serve r, before
// r is routed. It returns "" if no route serves r; the request is then
// [NoRoute]. It returns ok false if it cannot tell. Middleware then names r
// as it would without the option (see Middleware). Otherwise Middleware
// names r by its method and pattern, as [RouteResource] does.
//
// Adapters to other routers give WithRoute their router's lookup. A
// pattern must come from the router's routes, never from the request.
// [WithResource] wins over it. A nil route keeps the option in force.
// [Transport] ignores it.
func WithRoute(route func(r *http.Request) (pattern string, ok bool)) Option {
	return func(o *options) {
		if route != nil {
			o.route = route
		}
	}
}

// WithLogger is where [Middleware] says, once, that it cannot learn the
// routes of the requests it guards (see Middleware). The default, or a nil
// logger, is [slog.Default] at the time it says so.
func WithLogger(logger *slog.Logger) Option {
	return func(o *options) { o.logger = logger }
}

// build applies opts to the defaults; resource stays nil unless an option
// names it.
func build(opts []Option) options {
	o := options{blocked: WriteBlocked, isError: adapter.ServerError}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// entryOptions appends to eo the options of r's Enter: its key, the
// options WithEntryOptions gives (after the key, so that a key among them
// wins), and then last. It copies WithEntryOptions's slice rather than
// appending to it, which could write into an array that f shares between
// requests.
func (o *options) entryOptions(eo []slidegate.EntryOption, r *http.Request, last ...slidegate.EntryOption) []slidegate.EntryOption {
	if o.key != nil {
		eo = append(eo, slidegate.WithKey(o.key(r)))
	}
	if o.entry != nil {
		eo = append(eo, o.entry(r)...)
	}
	return append(eo, last...)
}

// NoRoute is the resource of the requests that no route serves, whatever
// their method and path. They are one resource, so that a client sending
// random paths makes no more than one.
const NoRoute = adapter.NoRoute

// Method returns r.Method if it is one of the methods of RFC 9110 and RFC
// 5789: GET, HEAD, POST, PUT, PATCH, DELETE, CONNECT, OPTIONS, TRACE.
// Otherwise it returns "_OTHER", as OpenTelemetry's semantic conventions
// do. So a resource name carries a method from a set of ten. net/http
// accepts any token as a method, and each would otherwise make a resource
// of its own.
func Method(r *http.Request) string { return adapter.Method(r) }

// RouteResource names a request by its method (see [Method]) and route,
// as in "GET /users/{id}". The route is the pattern that routed it:
// Request.Pattern, which [http.ServeMux] sets for the handlers it calls.
// The method prefixes it when the pattern names none. A request with no
// pattern is [NoRoute].
//
// Its names are bounded by the program's routes, not by what clients send:
// at most ten per pattern, and NoRoute. [Middleware] wrapping a
// [*http.ServeMux] asks that mux for the pattern before it routes the
// request.
func RouteResource(r *http.Request) string {
	if r.Pattern != "" {
		return adapter.WithMethod(Method(r), r.Pattern)
	}
	return NoRoute
}

// Middleware returns middleware that guards a handler with g. A nil g
// means [slidegate.Default]. Each request enters the guard as inbound
// traffic ([slidegate.WithInbound]). Its name is the one [WithResource] gives,
// or else the name of its route (see [RouteResource]). Middleware learns
// the route from the first of these that applies:
//
//   - The mux [WithMux] gives, or the router [WithRoute] gives.
//   - next, when next is a [*http.ServeMux].
//   - Request.Pattern, when a mux routed the request to Middleware.
//
// A mux or router is asked for the request's pattern before it routes the
// request. Placed directly around a mux, Middleware asks it with
// mux.Handler. Request.Pattern serves when Middleware guards one route, as
// in mux.Handle("GET /x", Middleware(g)(h)).
//
// Otherwise Middleware cannot learn the route before next routes the
// request. It names the request by its method and "(unknown route)", as
// in "GET (unknown route)", never by its raw path. So whatever clients send,
// the requests make at most ten names. Middleware says so once through
// the logger ([WithLogger]), since a rule on a route then never applies.
//
// Hence with other middleware between Middleware and the mux, give it the
// mux:
//
//	httpguard.Middleware(g, httpguard.WithMux(mux))(logging(mux))
//
// The other middleware must then not change the request's method or path.
// The mux is asked about them before that middleware runs.
//
// A blocked request gets [WriteBlocked]'s response (see
// [WithBlockedHandler]) and never reaches next. An allowed one exits the
// guard when next returns. It exits with an error if the status written
// counts as one ([WithIsError], 5xx by default), or if next panicked. A
// handler that writes nothing has written 200. After a panic, the request
// exits the guard and the panic goes on.
//
// A handler that holds its request open, such as an event stream, is a
// request in flight all along, and its whole life is response time.
// Serve such handlers beside the guarded mux, not behind it. Or end the
// entry early: the ResponseWriter that Middleware gives next has a method
// ExitGuard(). It exits the entry with the status written so far. Find it
// with an interface assertion, through Unwrap if other middleware wraps
// the writer. The event streams of [github.com/slidegate/slidegate/dashboard]
// call it.
func Middleware(g *slidegate.Guard, opts ...Option) func(http.Handler) http.Handler {
	if g == nil {
		g = slidegate.Default()
	}
	o := build(opts)
	return func(next http.Handler) http.Handler {
		h := &handler{g: g, next: next, o: o}
		if h.o.route == nil {
			if mux, ok := next.(*http.ServeMux); ok {
				WithMux(mux)(&h.o)
			}
		}
		return h
	}
}

type handler struct {
	g    *slidegate.Guard
	next http.Handler
	o    options
	// warned is set once the middleware has said that it cannot learn the
	// route.
	warned atomic.Bool
}

// name is the resource r enters (see Middleware).
func (h *handler) name(r *http.Request) string {
	switch {
	case h.o.resource != nil:
		return h.o.resource(r)
	case h.o.route != nil:
		// Ask the router, even when r.Pattern is set: that is the pattern
		// of an outer mux that routed the request here.
		if pattern, ok := h.o.route(r); ok {
			return adapter.PatternResource(r, pattern)
		}
	}
	if r.Pattern != "" {
		return adapter.WithMethod(Method(r), r.Pattern)
	}
	if !h.warned.Load() && h.warned.CompareAndSwap(false, true) {
		logger := h.o.logger
		if logger == nil {
			logger = slog.Default()
		}
		logger.Warn("httpguard: Middleware cannot learn the routes of the requests it guards, which share one resource per method, and rules on routes do not apply to them: place it directly around the *http.ServeMux, or give it the mux with WithMux",
			slog.String("resource", adapter.UnknownRouteResource(r)))
	}
	return adapter.UnknownRouteResource(r)
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var buf [4]slidegate.EntryOption // on the stack: Enter keeps none of them
	e, err := h.g.Enter(r.Context(), h.name(r), h.o.entryOptions(buf[:0], r, slidegate.WithInbound())...)
	if err != nil {
		h.o.blocked(w, r, err)
		return
	}
	// One allocation: the recorder, and the body that times the reads.
	x := &exchange{recorder: recorder{ResponseWriter: w, e: e, isError: h.o.isError}}
	rw := &x.recorder
	if r.Body != nil && r.Body != http.NoBody {
		x.body = pause.Body{ReadCloser: r.Body, E: e}
		r.Body = &x.body
	}
	defer func() {
		if v := recover(); v != nil {
			e.Exit(adapter.PanicError(v))
			panic(v) // on the original stack, which is not unwound yet
		}
	}()
	h.next.ServeHTTP(rw, r)
	if h.o.isError(rw.status()) {
		e.Exit(&StatusError{Status: rw.status()})
		return
	}
	e.Exit(nil)
}

// A StatusError is the error that [Middleware] and [Transport] record for
// a response whose status counts as an error (see [WithIsError]).
// Transport records it but does not return it: the caller gets the
// response.
type StatusError struct{ Status int }

// Error names the status.
func (e *StatusError) Error() string {
	return "httpguard: status " + strconv.Itoa(e.Status) + " " + http.StatusText(e.Status)
}

// Overloaded reports whether the status says that the server is over its
// capacity: 429 Too Many Requests or 503 Service Unavailable. It makes the
// error an overload signal ([slidegate.IsOverloaded]). An adaptive rule
// ([slidegate.AdaptiveRule]) of the client ([Transport]) or of the server
// ([Middleware]) backs off on it.
//
// Only a status recorded as an error is judged. By default ([WithIsError],
// 5xx) a 503 is and a 429 is not, so that a client's breakers do not open
// on another client's quota. Count 429 with WithIsError for an adaptive
// rule to back off on it too.
func (e *StatusError) Overloaded() bool {
	return e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable
}

// WriteBlocked is Middleware's default response to a blocked request. The
// status is 429 Too Many Requests when a flow rule blocked it for a limit
// the client reached. It is 503 Service Unavailable when the service
// cannot take it: a breaker is open, or a shed or adaptive rule found the
// service overloaded. Then the service, not the client, is over its limit.
// It is 503 too when the request ended while it waited.
//
// When the rule knows when a retry could be allowed, a Retry-After header
// says so, in whole seconds rounded up. The body is the status's text and
// nothing else. In particular, it is not the request's key
// ([slidegate.BlockError.Key]), which the client chose.
func WriteBlocked(w http.ResponseWriter, _ *http.Request, err error) {
	status, retryAfter := BlockedStatus(err)
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	http.Error(w, http.StatusText(status), status)
}

// BlockedStatus returns the status and the Retry-After header that
// [WriteBlocked] answers a blocked request with. A handler of
// [WithBlockedHandler] that writes its own body (JSON, say) can answer
// with them. status is 429 Too Many Requests for a limit the client
// reached. It is 503 Service Unavailable for an open breaker, an overload,
// and a request that ended while it waited. retryAfter is in whole seconds,
// rounded up, or "" when the rule does not know when to retry.
func BlockedStatus(err error) (status int, retryAfter string) { return adapter.BlockedStatus(err) }

// An exchange is what Middleware keeps of one request while its handler
// runs, in one allocation: the recorder, and the body whose reads wait on
// the client.
type exchange struct {
	recorder
	body pause.Body
}

// A recorder notes the status a handler writes. Its writes and flushes
// wait on the client, as the body's reads do: each is a pause of the
// request's entry (slidegate.Entry.Pause). It passes Flush, Hijack and the other optional
// interfaces on through Unwrap (http.ResponseController) and through its
// own Flush and Hijack methods, for handlers that assert them.
type recorder struct {
	http.ResponseWriter
	code    int
	e       slidegate.Entry       // the zero Entry, for Transport's: nothing to pause
	isError func(status int) bool // WithIsError's, for ExitGuard
}

// ExitGuard exits the request's entry now, as Middleware does when the
// handler returns, with the status written so far (200 if none). It is
// for handlers that hold a request open for long, such as event streams:
// the guard then counts them neither in flight nor in response times.
// Middleware exits no entry twice. Call it from the handler's goroutine,
// with no read of the body under way.
func (rw *recorder) ExitGuard() {
	if rw.isError != nil && rw.isError(rw.status()) {
		rw.e.Exit(&StatusError{Status: rw.status()})
		return
	}
	rw.e.Exit(nil)
}

func (rw *recorder) status() int {
	if rw.code == 0 {
		return http.StatusOK
	}
	return rw.code
}

func (rw *recorder) WriteHeader(code int) {
	if rw.code == 0 && code >= 200 {
		rw.code = code // 1xx responses are informational: the final status follows
	}
	rw.ResponseWriter.WriteHeader(code)
}

func (rw *recorder) Write(p []byte) (int, error) {
	if rw.code == 0 {
		rw.code = http.StatusOK
	}
	rw.e.Pause()
	defer rw.e.Resume()
	return rw.ResponseWriter.Write(p)
}

// Unwrap returns the wrapped ResponseWriter, for http.ResponseController.
func (rw *recorder) Unwrap() http.ResponseWriter { return rw.ResponseWriter }

// Flush flushes the response if the wrapped writer can.
func (rw *recorder) Flush() {
	if rw.code == 0 {
		rw.code = http.StatusOK
	}
	rw.e.Pause()
	defer rw.e.Resume()
	_ = http.NewResponseController(rw.ResponseWriter).Flush()
}

// Hijack hands the connection over if the wrapped writer can; the status is
// then whatever the handler writes on the connection, which the guard counts
// as 200 unless a status was written before.
func (rw *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(rw.ResponseWriter).Hijack()
}

// Transport returns an [http.RoundTripper] that guards the requests it
// sends through base with g. A nil base means [http.DefaultTransport], and
// a nil g [slidegate.Default]. Each request enters the guard, as outbound
// traffic, under the name [WithResource] gives. By default that is its
// method (see [Method]) and host, with its port if the URL has one:
// "GET api.example.com", "GET 127.0.0.1:9101".
//
// A blocked request returns a [*slidegate.BlockError] without reaching the
// network. The [http.Client] wraps it in a *url.Error. An allowed one exits
// when the response's headers arrive. It exits with an error if the round
// trip failed or the status counts as one ([WithIsError], 5xx by default).
// So the response time is the time to the headers, not to the end of the
// body. With [WithRetry], a request that fails may be sent again, each
// attempt entering the guard on its own.
func Transport(g *slidegate.Guard, base http.RoundTripper, opts ...Option) http.RoundTripper {
	if g == nil {
		g = slidegate.Default()
	}
	if base == nil {
		base = http.DefaultTransport
	}
	o := build(opts)
	if o.resource == nil {
		o.resource = hostResource
	}
	return &transport{g: g, base: base, o: o}
}

// hostResource is Transport's default name of an outgoing request.
func hostResource(r *http.Request) string { return Method(r) + " " + r.URL.Host }

type transport struct {
	g    *slidegate.Guard
	base http.RoundTripper
	o    options
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.o.retry != nil {
		return t.roundTripRetrying(r)
	}
	resp, _, err := t.attempt(r)
	return resp, err
}

// attempt sends r once through the guard, and reports whether the attempt
// was a half-open breaker's probe.
func (t *transport) attempt(r *http.Request) (resp *http.Response, probe bool, err error) {
	var buf [4]slidegate.EntryOption
	e, err := t.g.Enter(r.Context(), t.o.resource(r), t.o.entryOptions(buf[:0], r)...)
	if err != nil {
		if r.Body != nil {
			_ = r.Body.Close() // a RoundTripper must close the body, even on errors
		}
		return nil, false, err
	}
	probe = e.Probe()
	resp, err = t.base.RoundTrip(r)
	switch {
	case err != nil:
		e.Exit(err)
	case t.o.isError(resp.StatusCode):
		e.Exit(&StatusError{Status: resp.StatusCode})
	default:
		e.Exit(nil)
	}
	return resp, probe, err
}
