package redisflow

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/bounds"
	"github.com/slidegate/slidegate/internal/redistest"
)

func TestSlotIsRedisClusters(t *testing.T) {
	// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
	for key, want := range map[string]int{"123456789": 12739, "foo": 12182, "{user1000}.following": 3443, "{user1000}.followers": 3443, "foo{}{bar}": 8363} {
		if got := slot(key); got != want {
			t.Errorf("slot(%q) = %d; want %d", key, got, want)
		}
	}
}

// unescapeTag undoes escapeTag.
func unescapeTag(t testing.TB, tag string) string {
	if tag == "%" {
		return ""
	}
	r := strings.NewReplacer("%25", "%", "%7B", "{", "%7D", "}")
	return r.Replace(tag)
}

// hostileKeys are keys a client could send to break the layout: braces,
// what braces are escaped to, the empty key, binary bytes, a key that
// mimics the rest of a Redis key, and keys at and beyond the longest.
var hostileKeys = []string{
	"alice", "", "{", "}", "{}", "}{", "%", "%25", "%7B", "%7D", "%%", "a{b}c%",
	"alice}:hostile:1m0s:10", "alice}", "{alice", "*", "\x00", "\x00\xff\r\n",
	strings.Repeat("\xff", bounds.MaxKeyLength), strings.Repeat("}", bounds.MaxKeyLength),
}

// Every key's windows share one hash tag, the key escaped, and so one Redis
// Cluster slot; no two keys, whatever their bytes, share a Redis key; and a
// key longer than 256 is its first MaxKeyLength bytes.
func TestKeyedKeysKeepEveryKeyInItsOwnTag(t *testing.T) {
	c, err := New(client(t, "127.0.0.1:1"), WithInstances(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l := keyed(t, c, "GET /orders",
		flow.KeyWindow{Limit: 5, Interval: time.Second},
		flow.KeyWindow{Limit: 100, Interval: time.Minute, Buckets: 6})
	for key, want := range map[string][]string{
		"alice":  {"slidegate:k:{alice}:GET /orders:1s:20", "slidegate:k:{alice}:GET /orders:1m0s:6"},
		"a{b}c%": {"slidegate:k:{a%7Bb%7Dc%25}:GET /orders:1s:20", "slidegate:k:{a%7Bb%7Dc%25}:GET /orders:1m0s:6"},
		"":       {"slidegate:k:{%}:GET /orders:1s:20", "slidegate:k:{%}:GET /orders:1m0s:6"},
	} {
		if got := l.redisKeys(key); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("Keys(%q) = %q; want %q", key, got, want)
		}
	}
	owner := map[string]string{}
	for _, key := range hostileKeys {
		keys := l.redisKeys(key)
		for _, k := range keys {
			if tag := hashTag(k); tag == k || unescapeTag(t, tag) != key {
				t.Errorf("Keys(%q): %q hashes as %q; want the key, escaped", key, k, tag)
			}
			if slot(k) != slot(keys[0]) {
				t.Errorf("Keys(%q): %q in slot %d, %q in slot %d; want one slot", key, k, slot(k), keys[0], slot(keys[0]))
			}
			if o, ok := owner[k]; ok {
				t.Errorf("Keys(%q) and Keys(%q) both hold %q", key, o, k)
			}
			owner[k] = key
		}
	}
	long := strings.Repeat("x", bounds.MaxKeyLength)
	if a, b := l.redisKeys(long+"yz"), l.redisKeys(long); strings.Join(a, " ") != strings.Join(b, " ") {
		t.Errorf("a key of %d bytes has keys %q; want its first %d bytes', %q", len(long)+2, a, len(long), b)
	}
}

// In a real Redis, every hostile key gets its own limit, none a share of
// another's, and its strings are where Keys says.
func TestKeyedHostileKeysKeepTheirOwnCounts(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv.Addr)
	c := cluster(t, srv, WithInstances(1))
	l := keyed(t, c, "hostile", flow.KeyWindow{Limit: 2, Interval: time.Minute})
	for _, key := range hostileKeys {
		for i := range 3 {
			d, _ := l.allowKey(bg, key)
			if want := i < 2; d.Allowed != want {
				t.Errorf("key %q, request %d: allowed %v; want %v, the key having its own limit of 2", key, i, d.Allowed, want)
			}
		}
		if n := rdb.Exists(bg, l.redisKeys(key)...).Val(); n != 1 {
			t.Errorf("key %q: %d of its strings exist; want 1", key, n)
		}
	}
	if n := len(rdb.Keys(bg, "slidegate:k:*").Val()); n != len(hostileKeys) {
		t.Errorf("%d strings in Redis for %d keys; want one each", n, len(hostileKeys))
	}
	// The same key, longer than the longest told apart: its first
	// MaxKeyLength bytes, already refused.
	if d, _ := l.allowKey(bg, hostileKeys[len(hostileKeys)-1]+"}"); d.Allowed {
		t.Errorf("a key cut to the one before it: allowed; want refused, its count being that key's")
	}
}

// escapeTag is injective, never empty, never closes the tag, and undoes.
func FuzzEscapeTag(f *testing.F) {
	for _, key := range hostileKeys {
		f.Add(key, key+"%")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ea, eb := escapeTag(a), escapeTag(b)
		if ea == "" || strings.ContainsRune(ea, '}') || strings.ContainsRune(ea, '{') {
			t.Fatalf("escapeTag(%q) = %q: empty, or with a brace", a, ea)
		}
		if unescapeTag(t, ea) != a {
			t.Fatalf("escapeTag(%q) = %q, which undoes to %q", a, ea, unescapeTag(t, ea))
		}
		if a != b && ea == eb {
			t.Fatalf("escapeTag(%q) = escapeTag(%q) = %q", a, b, ea)
		}
		if !bytes.Equal([]byte(hashTag("p:k:{"+ea+"}:r:1s:10")), []byte(ea)) {
			t.Fatalf("the tag of %q does not hash as itself", ea)
		}
	})
}
