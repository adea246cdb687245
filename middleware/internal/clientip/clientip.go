// Package clientip finds the address of the client that sent a request,
// for the middleware packages' per-key options: the address of the
// immediate peer or, when that peer is a trusted reverse proxy, the address
// the proxies' forwarding header (X-Forwarded-For, RFC 7239 Forwarded)
// names.
//
// Everything but the peer's address is text a client may have written. A
// proxy appends the address of its own peer to the right of what it
// received, so the right-most entries of the header are the proxies', and
// anything to the left of the first address a trusted proxy did not write
// is the client's invention. Find therefore walks from the right and stops
// at the first address that is not a trusted proxy: that is the client. It
// reads a bounded number of bytes of a bounded number of entries, whatever
// the header's size, and stops at an entry it cannot read.
package clientip

import (
	"net/netip"
	"strings"
)

// MaxHops is how many entries of a forwarding header Find reads, from the
// right, at most: a chain of more trusted proxies than this is cut at the
// last one read.
const MaxHops = 32

// maxNode bounds the text of one address, with brackets, zone and port:
// "[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255]:65535" is 53 bytes, and
// only link-local addresses carry a zone, a short interface name.
const maxNode = 64

// maxElement bounds one element of a Forwarded header
// ("for=...;by=...;host=...;proto=..."), whose other parameters may be
// longer than an address.
const maxElement = 256

// A Format is the syntax of a forwarding header.
type Format uint8

const (
	// List is X-Forwarded-For's syntax: addresses separated by commas,
	// optionally with a port, IPv6 optionally in brackets.
	List Format = iota
	// Forwarded is RFC 7239's: elements separated by commas, each a list of
	// name=value pairs separated by semicolons, the client in "for".
	Forwarded
)

// Trusted is a set of prefixes. A zero (invalid) prefix matches nothing.
type Trusted []netip.Prefix

// Contains reports whether a is in one of the prefixes. An IPv4-mapped IPv6
// prefix (::ffff:10.0.0.0/104) matches the IPv4 addresses it maps, as
// ParseNode gives IPv4-mapped addresses as IPv4.
func (t Trusted) Contains(a netip.Addr) bool {
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
		if pa := p.Addr(); pa.Is4In6() && p.Bits() >= 96 && a.Is4() {
			if netip.PrefixFrom(pa.Unmap(), p.Bits()-96).Contains(a) {
				return true
			}
		}
	}
	return false
}

// ParseNode parses the address of a peer or a proxy as a server or a proxy
// writes it: "192.0.2.1", "192.0.2.1:8080", "2001:db8::1",
// "[2001:db8::1]", "[2001:db8::1]:8080", with an IPv6 zone ("%eth0")
// dropped, since it names an interface of the writer, not a host. An
// IPv4-mapped IPv6 address is given as IPv4, so that a dual-stack listener
// and an IPv4 one see the same client. text is the part of s that a is
// parsed from, without brackets, zone or port: equal to a.String() when s
// was written canonically. ok is false for anything else ("unknown",
// "_hidden", names, more than maxNode bytes). It does not allocate unless s
// is not an address.
func ParseNode(s string) (a netip.Addr, text string, ok bool) {
	if s == "" || len(s) > maxNode {
		return netip.Addr{}, "", false
	}
	host, bracketed := s, false
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 || !validPort(s[end+1:], true) {
			return netip.Addr{}, "", false
		}
		host, bracketed = s[1:end], true
	} else if i := strings.IndexByte(s, ':'); i >= 0 && strings.IndexByte(s[i+1:], ':') < 0 {
		// One colon: IPv4 and a port. Two or more: IPv6, which without
		// brackets cannot carry a port.
		if !validPort(s[i:], false) {
			return netip.Addr{}, "", false
		}
		host = s[:i]
	}
	zoned := false
	if i := strings.IndexByte(host, '%'); i >= 0 {
		if i == len(host)-1 {
			return netip.Addr{}, "", false // an empty zone
		}
		host, zoned = host[:i], true
	}
	if host == "" || !addressBytes(host) {
		return netip.Addr{}, "", false // spares ParseAddr's error, which allocates
	}
	a, err := netip.ParseAddr(host)
	if err != nil || (a.Is4() && (bracketed || zoned)) {
		return netip.Addr{}, "", false
	}
	return a.Unmap(), host, true
}

// addressBytes reports whether s holds only bytes an IP address's text can
// hold.
func addressBytes(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' || c == ':' || c == '.') {
			return false
		}
	}
	return true
}

// validPort reports whether s is empty (if optional) or ":" and a port: up
// to five digits, or RFC 7239's obfuscated port ("_" and letters, digits,
// ".", "_" or "-").
func validPort(s string, optional bool) bool {
	if s == "" {
		return optional
	}
	if s[0] != ':' || len(s) < 2 || len(s) > 17 {
		return false
	}
	p := s[1:]
	if p[0] == '_' {
		for i := 1; i < len(p); i++ {
			if c := p[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '.' || c == '_' || c == '-') {
				return false
			}
		}
		return len(p) > 1
	}
	if len(p) > 5 {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return false
		}
	}
	return true
}

// Find returns the client of a request from peer (its text as ParseNode
// returns it) whose forwarding header, in format f, has the lines given
// (the header's values in the order received; nil if absent).
//
// If peer is not in trusted, it is the client and the header is not read:
// the header of a request that no trusted proxy handled is the client's
// own invention. Otherwise Find walks the header's entries from the right,
// line by line from the last: each entry is the peer of the proxy that
// appended it, and the first that is not in trusted is the client. When
// every entry is trusted, the left-most is; when the header is absent or
// empty, peer is. An entry Find cannot read as an address (an obfuscated
// or "unknown" node, a name, garbage, an element longer than its bound) or
// the end of its budget of MaxHops entries ends the walk at the last
// address read, which is then a trusted proxy: it is the nearest hop that
// can be named. Empty list elements are skipped but counted.
//
// Find reads at most MaxHops entries of at most a few hundred bytes each,
// however long the header, and does not allocate unless an entry it reads
// is not an address.
func Find(peer netip.Addr, text string, lines []string, f Format, trusted Trusted) (client netip.Addr, clientText string) {
	client, clientText = peer, text
	if !trusted.Contains(peer) {
		return client, clientText
	}
	limit := maxNode
	if f == Forwarded {
		limit = maxElement
	}
	hops := 0
	for i := len(lines) - 1; i >= 0; i-- {
		for rest := lines[i]; rest != ""; {
			elem, before, ok := lastElement(rest, limit)
			if !ok {
				return client, clientText
			}
			rest = before
			if hops++; hops > MaxHops {
				return client, clientText
			}
			elem = trimSpace(elem)
			if elem == "" {
				continue
			}
			node := elem
			if f == Forwarded {
				if node, ok = forwardedFor(elem); !ok {
					return client, clientText
				}
			}
			a, at, ok := ParseNode(node)
			if !ok {
				return client, clientText
			}
			// Invariant: client is trusted, so this entry was appended by
			// it, and names its peer.
			client, clientText = a, at
			if !trusted.Contains(a) {
				return client, clientText
			}
		}
	}
	return client, clientText
}

// lastElement splits s at its last comma into the element after it and
// what comes before, looking at no more than the last limit+1 bytes. ok is
// false if the last element is longer than limit.
func lastElement(s string, limit int) (elem, before string, ok bool) {
	start := max(len(s)-limit-1, 0)
	i := strings.LastIndexByte(s[start:], ',')
	if i < 0 {
		if start > 0 {
			return "", "", false
		}
		return s, "", true
	}
	i += start
	return s[i+1:], s[:i], true
}

// forwardedFor returns the value of the "for" parameter of one element of a
// Forwarded header, unquoted. ok is false if the element has none, has it
// twice, or is not a list of name=value pairs. The value may still be
// anything (an obfuscated node, "unknown"): ParseNode judges it.
//
// A quoted value with a comma or a semicolon in it has been split already,
// and its pieces do not parse: the walk ends there. That errs towards a
// trusted proxy, never towards what a client wrote further left.
func forwardedFor(elem string) (value string, ok bool) {
	for elem != "" {
		var pair string
		pair, elem, _ = strings.Cut(elem, ";")
		if pair = trimSpace(pair); pair == "" {
			continue
		}
		name, v, found := strings.Cut(pair, "=")
		if !found || !strings.EqualFold(trimSpace(name), "for") {
			if !found {
				return "", false
			}
			continue
		}
		if ok {
			return "", false // "for" twice
		}
		v = trimSpace(v)
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		if strings.ContainsAny(v, "\"\\") {
			return "", false // an unbalanced or escaped quote: no address has one
		}
		value, ok = v, true
	}
	return value, ok
}

// trimSpace trims HTTP's optional whitespace, spaces and tabs.
func trimSpace(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
