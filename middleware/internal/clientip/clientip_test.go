package clientip

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParseNode(t *testing.T) {
	for _, tc := range []struct {
		in, want, text string // want "" means not an address
	}{
		{"192.0.2.1", "192.0.2.1", "192.0.2.1"},
		{"192.0.2.1:8080", "192.0.2.1", "192.0.2.1"},
		{"2001:db8::1", "2001:db8::1", "2001:db8::1"},
		{"[2001:db8::1]", "2001:db8::1", "2001:db8::1"},
		{"[2001:db8::1]:443", "2001:db8::1", "2001:db8::1"},
		{"[2001:DB8:0:0::1]:443", "2001:db8::1", "2001:DB8:0:0::1"},
		{"[fe80::1%eth0]:80", "fe80::1", "fe80::1"},
		{"fe80::1%25", "fe80::1", "fe80::1"},
		{"::ffff:192.0.2.1", "192.0.2.1", "::ffff:192.0.2.1"},
		{"[::ffff:192.0.2.1]:1", "192.0.2.1", "::ffff:192.0.2.1"},
		{"192.0.2.1:_obf", "192.0.2.1", "192.0.2.1"},
		{"[2001:db8::1]:_a-b.c", "2001:db8::1", "2001:db8::1"},
		{"", "", ""},
		{"unknown", "", ""},
		{"_hidden", "", ""},
		{"example.com", "", ""},
		{"example.com:80", "", ""},
		{"192.0.2.1:", "", ""},
		{"192.0.2.1:123456", "", ""},
		{"192.0.2.1:http", "", ""},
		{"192.0.2.1:_", "", ""},
		{"192.0.2.1%eth0", "", ""},
		{"[192.0.2.1]", "", ""},
		{"[192.0.2.1]:80", "", ""},
		{"[2001:db8::1", "", ""},
		{"[2001:db8::1]x", "", ""},
		{"[2001:db8::1]:", "", ""},
		{"[]", "", ""},
		{"fe80::1%", "", ""},
		{"%eth0", "", ""},
		{"192.0.2.256", "", ""},
		{"192.0.2", "", ""},
		{"01.2.3.4", "", ""},
		{" 192.0.2.1", "", ""},
		{"2001:db8::1:::", "", ""},
		{"[" + strings.Repeat("0", 60) + "::1]", "", ""},
		{"fe80::1%" + strings.Repeat("z", 100), "", ""},
	} {
		a, text, ok := ParseNode(tc.in)
		if got := addrText(a, ok); got != tc.want || (ok && text != tc.text) {
			t.Errorf("ParseNode(%q) = %q, %q, %v; want %q, %q", tc.in, got, text, ok, tc.want, tc.text)
		}
	}
}

func addrText(a netip.Addr, ok bool) string {
	if !ok {
		return ""
	}
	return a.String()
}

func prefixes(ss ...string) Trusted {
	var t Trusted
	for _, s := range ss {
		t = append(t, netip.MustParsePrefix(s))
	}
	return t
}

// TestFindWalksFromTheRight is the attacker's table: the client writes what
// it likes into the header, the trusted proxies append the addresses of
// their peers, and only those count.
func TestFindWalksFromTheRight(t *testing.T) {
	lb := prefixes("10.0.0.0/8", "2001:db8:ffff::/48")
	many := strings.Repeat("10.1.1.1, ", 10_000) // all trusted
	for _, tc := range []struct {
		name  string
		peer  string
		lines []string
		f     Format
		want  string
	}{
		{"untrusted peer: its spoofed header is ignored", "203.0.113.9", []string{"198.51.100.1"}, List, "203.0.113.9"},
		{"untrusted peer: spoofed Forwarded ignored", "203.0.113.9", []string{"for=198.51.100.1"}, Forwarded, "203.0.113.9"},
		{"trusted peer, no header: the proxy", "10.0.0.1", nil, List, "10.0.0.1"},
		{"trusted peer, empty header: the proxy", "10.0.0.1", []string{""}, List, "10.0.0.1"},
		{"one proxy", "10.0.0.1", []string{"198.51.100.7"}, List, "198.51.100.7"},
		{"spoof, then the real client", "10.0.0.1", []string{"1.1.1.1, 198.51.100.7"}, List, "198.51.100.7"},
		{"spoof, real client, two proxies", "10.0.0.1", []string{"1.1.1.1,198.51.100.7 ,10.0.0.2,\t10.0.0.3"}, List, "198.51.100.7"},
		{"spoofed trusted address left of the client", "10.0.0.1", []string{"10.9.9.9, 198.51.100.7"}, List, "198.51.100.7"},
		{"all trusted: the left-most", "10.0.0.1", []string{"10.0.0.5, 10.0.0.2"}, List, "10.0.0.5"},
		{"lines: the last is the nearest", "10.0.0.1", []string{"1.1.1.1", "198.51.100.7, 10.0.0.2"}, List, "198.51.100.7"},
		{"lines: walk on into the earlier ones", "10.0.0.1", []string{"198.51.100.7", "10.0.0.2"}, List, "198.51.100.7"},
		{"ports and brackets", "10.0.0.1", []string{"1.1.1.1, [2001:db8::7]:4711, 10.0.0.2:80"}, List, "2001:db8::7"},
		{"IPv6 proxies", "2001:db8:ffff::1", []string{"1.1.1.1, 2001:db8::7, 2001:db8:ffff::2"}, List, "2001:db8::7"},
		{"IPv4-mapped peer and entry", "::ffff:10.0.0.1", []string{"::ffff:198.51.100.7"}, List, "198.51.100.7"},
		{"zone on an entry", "10.0.0.1", []string{"fe80::7%eth0"}, List, "fe80::7"},
		{"garbage ends the walk at the proxy", "10.0.0.1", []string{"198.51.100.7, garbage"}, List, "10.0.0.1"},
		{"garbage left of the client is not read", "10.0.0.1", []string{"garbage, 198.51.100.7"}, List, "198.51.100.7"},
		{"unknown ends the walk", "10.0.0.1", []string{"198.51.100.7, unknown, 10.0.0.2"}, List, "10.0.0.2"},
		{"empty elements are skipped", "10.0.0.1", []string{"198.51.100.7,, ,10.0.0.2,"}, List, "198.51.100.7"},
		{"an element too long ends the walk", "10.0.0.1", []string{"198.51.100.7, " + strings.Repeat("1", 1000)}, List, "10.0.0.1"},
		{"a 10 MB line without commas", "10.0.0.1", []string{strings.Repeat("9", 10<<20)}, List, "10.0.0.1"},
		{"a 10 MB line ending in the client", "10.0.0.1", []string{strings.Repeat("x", 10<<20) + ",198.51.100.7"}, List, "198.51.100.7"},
		{"10,000 entries, all trusted: cut at MaxHops", "10.0.0.1", []string{"198.51.100.7, " + many + "10.1.1.2"}, List, "10.1.1.1"},
		{"10,000 lines, all trusted: cut at MaxHops", "10.0.0.1", append([]string{"198.51.100.7"}, strings.Split(strings.Repeat("10.1.1.1\n", 10_000), "\n")...), List, "10.1.1.1"},
		{"10,000 empty elements", "10.0.0.1", []string{"198.51.100.7" + strings.Repeat(",", 10_000)}, List, "10.0.0.1"},

		{"Forwarded: one proxy", "10.0.0.1", []string{"for=198.51.100.7;proto=https;by=10.0.0.1"}, Forwarded, "198.51.100.7"},
		{"Forwarded: spoof, then the client", "10.0.0.1", []string{`for=1.1.1.1, for="198.51.100.7"`}, Forwarded, "198.51.100.7"},
		{"Forwarded: IPv6, quoted, with a port", "10.0.0.1", []string{`for="[2001:db8:cafe::17]:4711"`}, Forwarded, "2001:db8:cafe::17"},
		{"Forwarded: case and spaces", "10.0.0.1", []string{`proto=http ; For = 198.51.100.7 ; by=_x`}, Forwarded, "198.51.100.7"},
		{"Forwarded: through two proxies", "10.0.0.1", []string{`for=1.1.1.1`, `for=198.51.100.7, for=10.0.0.2`}, Forwarded, "198.51.100.7"},
		{"Forwarded: obfuscated ends the walk", "10.0.0.1", []string{`for=198.51.100.7, for=_hidden, for=10.0.0.2`}, Forwarded, "10.0.0.2"},
		{"Forwarded: unknown ends the walk", "10.0.0.1", []string{`for=198.51.100.7, for=unknown`}, Forwarded, "10.0.0.1"},
		{"Forwarded: no for ends the walk", "10.0.0.1", []string{`for=198.51.100.7, proto=https`}, Forwarded, "10.0.0.1"},
		{"Forwarded: for twice ends the walk", "10.0.0.1", []string{`for=198.51.100.7;for=1.1.1.1`}, Forwarded, "10.0.0.1"},
		{"Forwarded: not pairs", "10.0.0.1", []string{`for=198.51.100.7, 198.51.100.8`}, Forwarded, "10.0.0.1"},
		{"Forwarded: a comma in quotes", "10.0.0.1", []string{`for="1.1.1.1, for=198.51.100.7"`}, Forwarded, "10.0.0.1"},
		{"Forwarded: an unbalanced quote", "10.0.0.1", []string{`for="198.51.100.7`}, Forwarded, "10.0.0.1"},
		{"Forwarded: escapes", "10.0.0.1", []string{`for="198.51.100.\7"`}, Forwarded, "10.0.0.1"},
		{"Forwarded: a long element", "10.0.0.1", []string{"for=198.51.100.7;x=" + strings.Repeat("y", 300)}, Forwarded, "10.0.0.1"},
		{"Forwarded: read as a list, it is garbage", "10.0.0.1", []string{"for=198.51.100.7"}, List, "10.0.0.1"},
		{"a list read as Forwarded is garbage", "10.0.0.1", []string{"198.51.100.7"}, Forwarded, "10.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peer, text, ok := ParseNode(tc.peer)
			if !ok {
				t.Fatalf("peer %q does not parse", tc.peer)
			}
			a, at := Find(peer, text, tc.lines, tc.f, lb)
			if a.String() != tc.want {
				t.Errorf("client %v, want %v", a, tc.want)
			}
			if back, _, ok := ParseNode(at); !ok || back != a {
				t.Errorf("client text %q does not parse back to %v", at, a)
			}
		})
	}
}

func TestTrustedContains(t *testing.T) {
	tr := prefixes("10.0.0.0/8", "::ffff:192.168.0.0/112", "2001:db8::/32")
	for addr, want := range map[string]bool{
		"10.1.2.3": true, "11.0.0.1": false, "192.168.7.7": true, "192.169.0.1": false,
		"2001:db8::1": true, "2001:db9::1": false, "::ffff:10.1.2.3": false, // ParseNode unmaps: never asked
	} {
		if got := tr.Contains(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Contains(%s) = %v, want %v", addr, got, want)
		}
	}
	if (Trusted{netip.Prefix{}}).Contains(netip.MustParseAddr("10.0.0.1")) {
		t.Error("the zero prefix matches")
	}
}

// TestFindAndKeyAllocateNothing checks the promise the middleware's
// allocation tests build on: for addresses written canonically, finding the
// client and making its key allocate nothing, the key being a substring of
// what the request already holds.
func TestFindAndKeyAllocateNothing(t *testing.T) {
	lb := prefixes("10.0.0.0/8")
	keys := NewKeys(0, 128)
	for _, tc := range []struct {
		peer  string
		lines []string
		f     Format
	}{
		{"198.51.100.7:5555", nil, List},
		{"[2001:db8::7]:5555", nil, List},
		{"10.0.0.1:5555", []string{"1.1.1.1, 198.51.100.7, 10.0.0.2"}, List},
		{"10.0.0.1:5555", []string{`for=1.1.1.1, for="[2001:db8::7]:1";proto=https, for=10.0.0.2`}, Forwarded},
	} {
		var key string
		n := testing.AllocsPerRun(100, func() {
			a, text, _ := ParseNode(tc.peer)
			a, text = Find(a, text, tc.lines, tc.f, lb)
			key = keys.Key(a, text)
		})
		if n != 0 || key == "" {
			t.Errorf("%s %q: %v allocations, key %q; want none", tc.peer, tc.lines, n, key)
		}
	}
}

// FuzzFind checks, for any header, that Find does not panic, returns the
// peer or an address that occurs in the header, and returns the peer
// whenever the peer is not trusted.
func FuzzFind(f *testing.F) {
	f.Add("10.0.0.1:1", "1.1.1.1, 198.51.100.7", false)
	f.Add("10.0.0.1:1", `for="[2001:db8::1]:4711";proto=https, for=_x`, true)
	f.Add("203.0.113.1:1", "10.0.0.2", false)
	f.Add("[::1]:1", ",,,", false)
	lb := prefixes("10.0.0.0/8", "::1/128")
	f.Fuzz(func(t *testing.T, peerAddr, header string, forwarded bool) {
		peer, text, ok := ParseNode(peerAddr)
		if !ok {
			return
		}
		format := List
		if forwarded {
			format = Forwarded
		}
		lines := strings.Split(header, "\n")
		a, at := Find(peer, text, lines, format, lb)
		if a == peer && at == text {
			return
		}
		if !lb.Contains(peer) {
			t.Fatalf("untrusted peer %v, but the client is %v", peer, a)
		}
		if !strings.Contains(header, at) {
			t.Fatalf("client text %q is not in the header %q", at, header)
		}
		if back, _, ok := ParseNode(at); !ok || back != a {
			t.Fatalf("client text %q does not parse back to %v", at, a)
		}
	})
}
