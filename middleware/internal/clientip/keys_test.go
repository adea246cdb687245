package clientip

import (
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestKeys(t *testing.T) {
	for _, tc := range []struct {
		node        string
		ipv4, ipv6  int
		want        string
		wantCanon   bool // the key is the node's text itself
		wantNetwork bool
	}{
		{node: "192.0.2.1:80", want: "192.0.2.1"},
		{node: "::ffff:192.0.2.1", want: "192.0.2.1"},
		{node: "::ffff:192.0.2.1", ipv4: 24, want: "192.0.2.0/24"},
		{node: "192.0.2.1", ipv4: 24, want: "192.0.2.0/24"},
		{node: "192.0.2.1", ipv4: 33, want: "192.0.2.1"},
		{node: "192.0.2.1", ipv4: -1, want: "192.0.2.1"},
		{node: "[2001:DB8:0::1]:80", want: "2001:db8::/64"},
		{node: "2001:db8:1:2:3:4:5:6", want: "2001:db8:1:2::/64"},
		{node: "2001:db8:1:2:3:4:5:6", ipv6: -1, want: "2001:db8:1:2::/64"},
		{node: "2001:db8:1:2:3:4:5:6", ipv6: 56, want: "2001:db8:1::/56"},
		{node: "2001:db8:1:2:3:4:5:6", ipv6: 128, want: "2001:db8:1:2:3:4:5:6"},
		{node: "2001:db8:1:2:3:4:5:6", ipv6: 129, want: "2001:db8:1:2:3:4:5:6"},
		{node: "[2001:DB8:0::1]:80", ipv6: 128, want: "2001:db8::1"},
		{node: "fe80::1%eth0", ipv6: 128, want: "fe80::1"},
		{node: "fe80::1%eth0", want: "fe80::/64"},
	} {
		a, text, ok := ParseNode(tc.node)
		if !ok {
			t.Fatalf("%q does not parse", tc.node)
		}
		k := NewKeys(tc.ipv4, tc.ipv6)
		got := k.Key(a, text)
		if got != tc.want {
			t.Errorf("Key(%q) with %d and %d bits = %q, want %q", tc.node, tc.ipv4, tc.ipv6, got, tc.want)
		}
		if again := k.Key(a, text); again != got {
			t.Errorf("Key(%q) again = %q, first %q", tc.node, again, got)
		}
	}
	k := NewKeys(0, 0)
	if got := k.Key(netip.Addr{}, ""); got != "" {
		t.Errorf("the zero Addr's key is %q", got)
	}
	// A zone given by the caller (a net.TCPAddr's) is not part of the key.
	if got := NewKeys(0, 128).Key(netip.MustParseAddr("fe80::1%eth0"), ""); got != "fe80::1" {
		t.Errorf("zoned: %q", got)
	}
}

// TestKeysOfNetworksAllocateNothingWhenSeenAgain: the key of a network the
// table holds is the same string, made once; one that an attacker's spread
// of networks evicted is made again, and right.
func TestKeysOfNetworksAllocateNothingWhenSeenAgain(t *testing.T) {
	k := NewKeys(24, 0)
	for _, node := range []string{"2001:db8:1:2:3:4:5:6", "192.0.2.77"} {
		a, text, _ := ParseNode(node)
		first := k.Key(a, text)
		var key string
		if n := testing.AllocsPerRun(100, func() { key = k.Key(a, text) }); n != 0 || key != first {
			t.Errorf("%s: %v allocations, key %q; want none, %q", node, n, key, first)
		}
	}
	// 100,000 networks, which evict each other: each key right.
	for i := range 100_000 {
		a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(i >> 16), byte(i >> 8), byte(i), 0, 8: 1})
		if got, want := k.Key(a, ""), netip.PrefixFrom(a, 64).Masked().String(); got != want {
			t.Fatalf("network %d: key %q, want %q", i, got, want)
		}
	}
}

// TestKeysSpreadNetworksOverTheTable: the /64s of one /48, the networks an
// attacker with a /48 has, and the /24s of IPv4, fill most of the table,
// rather than a few of its slots.
func TestKeysSpreadNetworksOverTheTable(t *testing.T) {
	for _, tc := range []struct {
		name string
		addr func(i int) netip.Prefix
	}{
		{"the /64s of a /48", func(i int) netip.Prefix {
			return netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, byte(i >> 8), byte(i)}), 64)
		}},
		{"IPv4 /24s", func(i int) netip.Prefix {
			return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)
		}},
	} {
		used := map[uint64]bool{}
		for i := range keySlots {
			used[hash(tc.addr(i))] = true
		}
		// Random indexes would fill 1 - 1/e of the slots, 63%.
		if len(used) < keySlots/2 {
			t.Errorf("%s: %d networks use %d slots of %d", tc.name, keySlots, len(used), keySlots)
		}
	}
}

// TestKeysAreSafeForConcurrentUse makes and reads keys of colliding
// networks from several goroutines, under the race detector.
func TestKeysAreSafeForConcurrentUse(t *testing.T) {
	k := NewKeys(0, 0)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 5000 {
				n := (i + w) % 3000
				a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, byte(n >> 8), byte(n), 15: 1})
				want := netip.PrefixFrom(a, 64).Masked().String()
				if got := k.Key(a, ""); got != want {
					t.Errorf("key %q, want %q", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// sink keeps what a benchmark makes, as a caller would.
var sink string

// BenchmarkKeys measures a key: of an IPv4 address written canonically,
// the text itself; of an IPv6 client's /64, from the table, and made anew
// each time, as it is for a network the table does not hold.
func BenchmarkKeys(b *testing.B) {
	b.Run("baseline=time.Now", func(b *testing.B) {
		for b.Loop() {
			_ = time.Now()
		}
	})
	k := NewKeys(0, 0)
	v4, v4text, _ := ParseNode("198.51.100.7:5555")
	v6, v6text, _ := ParseNode("[2001:db8:1:2:3:4:5:6]:5555")
	b.Run("IPv4", func(b *testing.B) {
		for b.Loop() {
			sink = k.Key(v4, v4text)
		}
	})
	b.Run("IPv6/64/kept", func(b *testing.B) {
		for b.Loop() {
			sink = k.Key(v6, v6text)
		}
	})
	b.Run("IPv6/64/made", func(b *testing.B) {
		var buf [64]byte
		for b.Loop() {
			p, _ := v6.Prefix(64)
			sink = string(p.AppendTo(buf[:0]))
		}
	})
}

// TestKeysTakeAboutAHundredKiBWhenFull fills a table with more networks
// than it holds: it takes what its doc says, however many more come.
func TestKeysTakeAboutAHundredKiBWhenFull(t *testing.T) {
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	k := NewKeys(0, 0)
	for i := range 100_000 {
		a := netip.AddrFrom16([16]byte{0xff, 0xff, 0xff, 0xff, 0xff, byte(i >> 16), byte(i >> 8), byte(i), 15: 1})
		k.Key(a, "")
	}
	used := int64(heap()) - int64(before)
	runtime.KeepAlive(k)
	t.Logf("a table after 100,000 /64s: %d bytes", used)
	if used > 128<<10 {
		t.Errorf("a full table takes %d bytes, want about 100 KiB", used)
	}
}
