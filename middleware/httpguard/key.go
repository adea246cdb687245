package httpguard

import (
	"net/http"
	"net/netip"
	"net/textproto"
	"slices"

	"github.com/slidegate/slidegate/internal/bounds"
	"github.com/slidegate/slidegate/middleware/internal/clientip"
)

// KeyFrom takes each request's key from f. A nil f keeps the key option in
// force. A key longer than 256 is cut to that length.
// KeyFrom works for [Middleware] and [Transport] alike. f may read the
// request's context, such as a tenant an authentication middleware stored
// there. That is what a Transport usually has.
func KeyFrom(f func(*http.Request) string) Option {
	return func(o *options) {
		if f != nil {
			o.key = func(r *http.Request) string { return cut(f(r)) }
		}
	}
}

// KeyFromHeader takes each request's key from the first value of the
// header called name, such as an API key or a tenant. For [Middleware] it
// is the header the client sent. For [Transport] it is the one the request
// carries. A request without the header, or with an empty value, has the
// empty key "". So all such requests share one key's limit: a per-key rule
// limits them together. That is what makes it safe to let clients omit the
// header. A value longer than 256 is cut to that
// length. The key shares its bytes with the header, so it costs no
// allocation.
//
// The header says what the client claims. Use it to share capacity among
// clients that do not lie, not to hold back ones that do. An API key
// checked before the handler runs does not lie, nor does a tenant a
// gateway sets. A client that lies can send a new value with every
// request. [KeyFromClient] keys by what a client cannot choose.
func KeyFromHeader(name string) Option {
	canonical := textproto.CanonicalMIMEHeaderKey(name)
	return func(o *options) {
		o.key = func(r *http.Request) string {
			if v := r.Header[canonical]; len(v) > 0 {
				return cut(v[0])
			}
			return ""
		}
	}
}

// KeyFromClient takes each request's key from its client's IP address, as
// c finds it (see [ClientIP]). The key is the address's network of
// c.IPv4Bits or c.IPv6Bits bits. By default an IPv4 client's key is its
// address's canonical text ("192.0.2.1"). An IPv6 client's key is its
// /64's ("2001:db8:1:2::/64"), which a client cannot leave by changing its
// address. With no TrustedProxies, the client is the connection's peer,
// and forwarding headers are ignored:
//
//	httpguard.KeyFromClient(httpguard.ClientIP{TrustedProxies: []netip.Prefix{lb}})
//
// A request whose peer is not an IP address, such as a Unix socket, has
// the empty key. c is copied: changing it, or its TrustedProxies,
// afterwards changes nothing.
//
// For [Middleware], an IPv4 address that the server or a trusted proxy
// wrote canonically, as they do, costs no allocation. The key is a part of
// Request.RemoteAddr or of the forwarding header. Nor does a network whose
// key was made recently cost one (see ClientIP.IPv4Bits).
//
// For [Transport], KeyFromClient gives every request the empty key: an
// outgoing request has no client address.
func KeyFromClient(c ClientIP) Option {
	c.TrustedProxies = slices.Clone(c.TrustedProxies)
	c.Header = c.headerName()
	keys := clientip.NewKeys(c.IPv4Bits, c.IPv6Bits)
	return func(o *options) {
		o.key = func(r *http.Request) string {
			a, text := c.find(r)
			return keys.Key(a, text)
		}
	}
}

// ClientIP says how to find the IP address of the client that sent a
// request. The request may have reached the server through reverse
// proxies, such as load balancers, CDNs and ingress controllers.
//
// The client is the peer of the request's connection (the host of
// Request.RemoteAddr), unless that peer is in TrustedProxies. A trusted
// proxy appends the address of its own peer to the forwarding header
// (Header). It appends it to the right of whatever the request carried
// when it arrived, which a client may have written anything into. So the
// header is read from the right. Each address in TrustedProxies is a proxy
// that passed the request on, and the first that is not is the client.
// Addresses to its left are never read, whatever they say. If all the
// addresses read are trusted, the client is the left-most of them. If the
// header is absent, the client is the trusted peer itself.
//
// An entry that is not an address ends the walk at the last trusted proxy
// read. That proxy is then taken for the client: it is the nearest hop
// that can be named. Every request it hides the client of shares its key.
// Such entries are RFC 7239's "unknown" and obfuscated "_hidden" nodes,
// host names, and garbage. The walk reads at most 32 entries, however long
// the header. An entry may be at most 64 bytes, or 256 for a Forwarded
// element; a longer entry ends the walk too. A chain of more than 32
// trusted proxies is cut there.
//
// Addresses may be written with a port ("192.0.2.1:4711",
// "[2001:db8::1]:4711"), IPv6 with or without brackets. An IPv6 zone is
// dropped. An IPv4-mapped IPv6 address (::ffff:192.0.2.1) is taken as the
// IPv4 address it maps. A peer that is not an IP address makes the client
// unknown: the zero [netip.Addr], whose key is "". Such a peer is a Unix
// socket, or a RemoteAddr that another middleware rewrote into something
// else.
//
// Trust only the proxies in front of the server, and only if every path to
// the server goes through them. A client that can reach the server
// directly from a trusted address can write the header. Middleware that
// runs before this one and rewrites RemoteAddr from a header defeats the
// check. Give its trusted proxies to ClientIP instead.
type ClientIP struct {
	// TrustedProxies are the addresses of the reverse proxies whose
	// forwarding header is believed. None, the default, means the header
	// is never read. A zero netip.Prefix matches nothing. An IPv4-mapped
	// prefix (::ffff:10.0.0.0/104) matches the IPv4 addresses it maps.
	// They are tried in order, one by one: keep them few.
	TrustedProxies []netip.Prefix

	// Header is the forwarding header the trusted proxies append to:
	// "X-Forwarded-For" if empty. "Forwarded" is read as RFC 7239
	// defines it, by the "for" parameter of each element. Any other
	// header is read as a comma-separated list of addresses, as
	// X-Forwarded-For is. Only this header is read. A client can send any
	// of the others through the proxies untouched, so name the one they
	// write.
	Header string

	// IPv6Bits is the length of the network an IPv6 client is keyed by.
	// With 64, every address of 2001:db8:1:2::/64 has the key
	// "2001:db8:1:2::/64". 0 means 64, the default, and 128 the whole
	// address. A negative count means 64, and one above 128 the whole
	// address. 64 is the least that holds a client to one key, however it
	// picks its addresses; fewer bits hold more of its neighbours with it.
	// docs/middleware.md says why.
	IPv6Bits int

	// IPv4Bits is the length of the network an IPv4 client is keyed by.
	// 0 means 32, the whole address ("192.0.2.1"), the default. With 24,
	// every address of 192.0.2.0/24 has the key "192.0.2.0/24". A negative
	// count means 32, as does one above 32. An IPv4-mapped IPv6 address
	// (::ffff:192.0.2.1) is keyed as the IPv4 address it maps.
	//
	// The key of a network is kept in a table of 1,024, one per hash of
	// the network, so that a client seen again costs no allocation.
	// Clients that spread over more networks than that evict each other.
	// They cost an allocation per request, never more memory: about
	// 100 KiB an option.
	IPv4Bits int
}

// Addr returns the IP address of the client that sent r, as c's doc says.
// It returns the zero [netip.Addr] if the peer is not an IP address. It
// does not allocate for addresses written canonically, nor for a canonical
// Header.
func (c ClientIP) Addr(r *http.Request) netip.Addr {
	a, _ := c.find(r)
	return a
}

// find returns the client's address and the text it was read from.
func (c ClientIP) find(r *http.Request) (netip.Addr, string) {
	peer, text, ok := clientip.ParseNode(r.RemoteAddr)
	if !ok {
		return netip.Addr{}, ""
	}
	if len(c.TrustedProxies) == 0 {
		return peer, text
	}
	name := c.headerName()
	format := clientip.List
	if name == "Forwarded" {
		format = clientip.Forwarded
	}
	return clientip.Find(peer, text, r.Header[name], format, c.TrustedProxies)
}

// headerName returns the canonical name of the forwarding header.
func (c ClientIP) headerName() string {
	if c.Header == "" {
		return "X-Forwarded-For"
	}
	return textproto.CanonicalMIMEHeaderKey(c.Header)
}

// cut returns key's first 256 bytes, all the guard
// tells apart: a key longer than that is input nobody needs to carry.
func cut(key string) string {
	if len(key) > bounds.MaxKeyLength {
		return key[:bounds.MaxKeyLength]
	}
	return key
}
