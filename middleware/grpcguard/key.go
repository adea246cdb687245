package grpcguard

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/slidegate/slidegate/internal/bounds"
	"github.com/slidegate/slidegate/middleware/internal/clientip"
)

// KeyFrom takes each RPC's key ([slidegate.WithKey], what per-key rules
// limit on its own) from f. f is called with the RPC's context and full
// method, as [WithResource]'s function is. A nil f keeps the key option in
// force. A key longer than 256 is cut to that length.
//
// KeyFrom is the one key option of the client interceptors, for which f
// typically reads a tenant or a user from ctx. On a server, ctx carries
// the incoming metadata and the peer. It also carries whatever an
// authentication interceptor that runs before stored.
func KeyFrom(f func(ctx context.Context, fullMethod string) string) Option {
	return func(o *options) {
		if f != nil {
			o.key = func(ctx context.Context, fullMethod string) string { return cut(f(ctx, fullMethod)) }
			o.serverKey = false
		}
	}
}

// KeyFromMetadata takes each RPC's key from the first value of the
// incoming metadata key name, such as an API key or a tenant. name is
// matched without regard to case, as gRPC metadata keys are. An RPC
// without it, or with an empty value, has the empty key "". So all such
// RPCs share one key's limit. A value longer than 256
// is cut to that length. It is a server option. A client interceptor
// ignores it, and its calls have the empty key unless [KeyFrom] gives one.
//
// The metadata says what the client claims. Use it to share capacity among
// clients that do not lie, not to hold back ones that do. A key checked by
// an interceptor that runs before does not lie. A client that lies can
// send a new value with every call. [KeyFromPeer] keys by what a client
// cannot choose.
func KeyFromMetadata(name string) Option {
	name = strings.ToLower(name) // as grpc-go stores incoming keys: found without a scan
	return func(o *options) {
		o.key = func(ctx context.Context, _ string) string {
			if v := metadata.ValueFromIncomingContext(ctx, name); len(v) > 0 {
				return cut(v[0])
			}
			return ""
		}
		o.serverKey = true
	}
}

// KeyFromPeer takes each RPC's key from its client's IP address. That is
// the address of the connection's peer. When that peer is in trusted, it
// is the address the "x-forwarded-for" metadata names (see [PeerAddr]). An
// IPv4 client's key is its address's canonical text ("192.0.2.1"). An
// IPv6 client's key is its /64's ("2001:db8:1:2::/64"), which a client
// cannot leave by changing its address (see [KeyFromPeerNetwork]). An RPC
// whose peer has no IP address, such as a Unix socket or an in-memory
// connection, has the empty key. trusted is copied.
//
// It is a server option. A client interceptor ignores it, and its calls
// have the empty key unless [KeyFrom] gives one.
//
// An IPv4 key costs an allocation per RPC, for the address's text. A
// network's key costs none once made, while it is among the 1,024 the
// option keeps.
func KeyFromPeer(trusted ...netip.Prefix) Option {
	return KeyFromPeerNetwork(0, 0, trusted...)
}

// KeyFromPeerNetwork is [KeyFromPeer] keying a client by its network. The
// network is ipv4Bits long for an IPv4 address ("192.0.2.0/24" with 24),
// and ipv6Bits long for an IPv6 one ("2001:db8:1::/56" with 56). Zero or a
// negative count is the default: 32, the whole address, for IPv4, and 64
// for IPv6. A count above the address's length is the whole address. An
// IPv4-mapped address (::ffff:192.0.2.1) is keyed as the IPv4 address it
// maps.
//
// 64 is the least that holds an IPv6 client to one key, however it picks
// its addresses; fewer bits hold more of its neighbours with it.
// docs/middleware.md says why.
func KeyFromPeerNetwork(ipv4Bits, ipv6Bits int, trusted ...netip.Prefix) Option {
	trusted = slices.Clone(trusted)
	keys := clientip.NewKeys(ipv4Bits, ipv6Bits)
	return func(o *options) {
		o.key = func(ctx context.Context, _ string) string {
			a, text := peerAddr(ctx, trusted)
			return keys.Key(a, text)
		}
		o.serverKey = true
	}
}

// PeerAddr returns the IP address of the client of the RPC whose server
// context is ctx. That is the address of the connection's peer, unless the
// peer is in trusted. A trusted peer is a proxy in front of the server,
// such as grpc-gateway or Envoy. It appends the address of its own peer to
// the "x-forwarded-for" metadata.
//
// The metadata's values are then read from the right. Each address in
// trusted is a proxy that passed the RPC on, and the first that is not is
// the client. Addresses to its left, which a client may have written, are
// never read. If all the addresses read are trusted, the client is the
// left-most of them. Without the metadata, it is the trusted peer itself.
// An entry that is not an address ends the walk at the last trusted proxy
// read, which is taken for the client. The walk reads at most 32 entries,
// of at most 64 bytes each. With no trusted prefixes, the metadata is
// never read.
//
// PeerAddr returns the zero [netip.Addr] if the peer has no IP address. An
// IPv6 zone is dropped. An IPv4-mapped address is taken as the IPv4
// address it maps. A client that can reach the server directly from a
// trusted address can write the metadata. Trust only proxies that every
// path goes through.
func PeerAddr(ctx context.Context, trusted ...netip.Prefix) netip.Addr {
	a, _ := peerAddr(ctx, trusted)
	return a
}

// peerAddr returns PeerAddr's address and the text it was read from ("" for
// the peer's own address, which has none).
func peerAddr(ctx context.Context, trusted clientip.Trusted) (netip.Addr, string) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return netip.Addr{}, ""
	}
	var a netip.Addr
	switch addr := p.Addr.(type) {
	case *net.TCPAddr:
		a = addr.AddrPort().Addr()
	case *net.UDPAddr:
		a = addr.AddrPort().Addr()
	default:
		a, _, _ = clientip.ParseNode(addr.String())
	}
	if !a.IsValid() {
		return netip.Addr{}, ""
	}
	a = a.Unmap().WithZone("")
	if len(trusted) == 0 || !trusted.Contains(a) {
		return a, ""
	}
	return clientip.Find(a, "", metadata.ValueFromIncomingContext(ctx, "x-forwarded-for"), clientip.List, trusted)
}

// cut returns key's first 256 bytes, all the guard
// tells apart: a key longer than that is input nobody needs to carry.
func cut(key string) string {
	if len(key) > bounds.MaxKeyLength {
		return key[:bounds.MaxKeyLength]
	}
	return key
}
