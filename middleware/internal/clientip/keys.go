package clientip

import (
	"encoding/binary"
	"net/netip"
	"sync/atomic"
)

// The networks clients are keyed by unless configured otherwise: an IPv4
// client by its whole address, an IPv6 client by its /64, the least that a
// subscriber is given and draws its addresses from at will (see Keys).
const (
	DefaultIPv4Bits = 32
	DefaultIPv6Bits = 64
)

// keySlots is the size of a Keys' table of network keys: 1<<keyBits.
const (
	keyBits  = 10
	keySlots = 1 << keyBits
)

// Keys makes the keys of clients from their addresses: the canonical text
// of the address ("192.0.2.1"), or of its network when keyed by fewer bits
// than the address has ("2001:db8:1:2::/64"). An IPv4-mapped IPv6 address
// is keyed as the IPv4 address it maps, and a zone is dropped.
//
// Why an IPv6 client is keyed by its /64 by default: a subscriber is given
// a /64 at the least, often a /56 or a /48 (RFC 6177), and its hosts take
// addresses from it as they please. Privacy addresses (RFC 8981) change on
// their own within it, and a client that wants to escape a limit on one
// address takes a new one for each request. Fewer bits hold more of a site
// to one key, and with it more of its neighbours.
//
// A network's key is a new string, which would cost an allocation per
// request: Keys keeps the keys of the networks it made last in a table of
// keySlots entries, one per hash of the network, so that a client seen
// again gets the same string without allocating. A client that spreads its
// addresses over many networks only evicts entries, each made again at the
// cost of the allocation: the table never grows (about 100 KiB when full).
// Readers and writers take no lock: an entry is an immutable value behind
// an atomic pointer, replaced whole.
type Keys struct {
	ipv4Bits, ipv6Bits int
	table              [keySlots]atomic.Pointer[networkKey]
}

// A networkKey is a network and its key.
type networkKey struct {
	network netip.Prefix
	key     string
}

// NewKeys returns Keys that key IPv4 clients by their network of ipv4Bits
// and IPv6 clients by their network of ipv6Bits. Zero or a negative count
// means the default (DefaultIPv4Bits, DefaultIPv6Bits); a count above the
// address's length means the whole address.
func NewKeys(ipv4Bits, ipv6Bits int) *Keys {
	return &Keys{ipv4Bits: bits(ipv4Bits, DefaultIPv4Bits, 32), ipv6Bits: bits(ipv6Bits, DefaultIPv6Bits, 128)}
}

// bits returns n in [1, most], def for n <= 0.
func bits(n, def, most int) int {
	if n <= 0 {
		return def
	}
	return min(n, most)
}

// Key returns the key of client a, whose text is as ParseNode (or Find)
// returned it ("" if unknown). The zero Addr's key is "". Keyed by its
// whole address, a client whose text is already canonical, as servers and
// proxies write addresses, has text itself as its key, which allocates
// nothing; any other text costs an allocation. Keyed by its network, a
// client costs none while its network's key is in the table.
func (k *Keys) Key(a netip.Addr, text string) string {
	if !a.IsValid() {
		return ""
	}
	a = a.Unmap().WithZone("")
	n := k.ipv6Bits
	if a.Is4() {
		n = k.ipv4Bits
	}
	if n < a.BitLen() {
		p, _ := a.Prefix(n) // cannot fail: no zone, the bits in range
		return k.network(p)
	}
	var buf [48]byte // the longest IPv6 text is 45 bytes
	b := a.AppendTo(buf[:0])
	if string(b) == text {
		return text
	}
	return string(b)
}

// network returns p's key, from the table if it holds it, else made and
// put in the table in place of the entry of the same hash.
func (k *Keys) network(p netip.Prefix) string {
	slot := &k.table[hash(p)]
	if e := slot.Load(); e != nil && e.network == p {
		return e.key
	}
	var buf [64]byte // the longest IPv6 text is 45 bytes, and "/128" follows it
	e := &networkKey{network: p, key: string(p.AppendTo(buf[:0]))}
	slot.Store(e)
	return e.key
}

// hash returns the index in the table of a network: its address and
// length mixed by SplitMix64's finalizer, which makes every bit of the
// output depend on every bit of the input, so that networks that differ in
// a few bits (the /64s of a /48, the /24s of an IPv4 /16) spread over the
// table.
func hash(p netip.Prefix) uint64 {
	b := p.Addr().As16()
	hi, lo := binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	return mix(hi^mix(lo^uint64(p.Bits()))) >> (64 - keyBits)
}

// mix is SplitMix64's finalizer.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
