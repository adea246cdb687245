package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/redistest"
	"github.com/slidegate/slidegate/internal/syncbuf"
)

// --redis takes host:port as before, or a redis:// or rediss:// URL with
// a user, a password, a database and TLS; the password of
// SLIDEGATE_REDIS_PASSWORD replaces the URL's.
func TestRedisFlagTakesHostPortOrAURL(t *testing.T) {
	for _, c := range []struct {
		value, env           string
		addr, user, password string
		db, pool             int
		tls                  bool
	}{
		{value: "127.0.0.1:6379", addr: "127.0.0.1:6379", pool: serveConns},
		{value: "redis:6379", addr: "redis:6379", pool: serveConns},
		{value: "[::1]:6380", env: "from-env", addr: "[::1]:6380", password: "from-env", pool: serveConns},
		{value: "redis://alice:s3cret@cache:6390/4", addr: "cache:6390", user: "alice", password: "s3cret", db: 4, pool: serveConns},
		{value: "redis://alice:s3cret@cache/4", env: "from-env", addr: "cache:6379", user: "alice", password: "from-env", db: 4, pool: serveConns},
		{value: "rediss://cache:6380?pool_size=8", addr: "cache:6380", pool: 8, tls: true},
	} {
		o, err := redisOptions(c.value, func(k string) string {
			if k == redisPasswordEnv {
				return c.env
			}
			return ""
		})
		if err != nil {
			t.Errorf("%q: %v", c.value, err)
			continue
		}
		if o.Addr != c.addr || o.Username != c.user || o.Password != c.password || o.DB != c.db ||
			o.PoolSize != c.pool || (o.TLSConfig != nil) != c.tls || !o.ContextTimeoutEnabled {
			t.Errorf("%q: addr %q user %q password %q db %d pool %d TLS %v timeouts %v",
				c.value, o.Addr, o.Username, o.Password, o.DB, o.PoolSize, o.TLSConfig != nil, o.ContextTimeoutEnabled)
		}
	}
}

// A bad --redis is refused with an error that names the flag and the
// value, the password hidden, whether or not the value parses.
func TestRedisFlagRefusesABadValueNamingItWithoutThePassword(t *testing.T) {
	for _, c := range []struct{ value, want string }{
		{"localhost", `--redis "localhost": not host:port`},
		{"cache:0", `--redis "cache:0": not host:port`},
		{"cache:65536", `--redis "cache:65536": not host:port`},
		{"cache:port", `--redis "cache:port": not host:port`},
		{"alice:s3cret@cache:6379", `--redis "alice:xxxxx@cache:6379": not host:port`},
		{"http://cache:6379", `--redis "http://cache:6379": invalid URL scheme: http`},
		{"redis://alice:s3cret@cache:6379/four", `--redis "redis://alice:xxxxx@cache:6379/four": invalid database number: "four"`},
		{"redis://alice:s3cret@cache:po/rt", `--redis "redis://alice:xxxxx@cache:po/rt": invalid port ":po"`},
		{"redis://alice:s3%2Fcret@cache:6379?nope=1", `--redis "redis://alice:xxxxx@cache:6379?nope=1": unexpected option: nope`},
		{"rediss://:s3cret@cache:6379?dial_timeout=soon", `--redis "rediss://:xxxxx@cache:6379?dial_timeout=soon": invalid dial_timeout duration`},
	} {
		_, err := redisOptions(c.value, func(string) string { return "env-s3cret" })
		if err == nil {
			t.Errorf("%q accepted", c.value)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, c.want) || strings.Contains(msg, "s3cret") || strings.Contains(msg, "s3/cret") {
			t.Errorf("%q: error %q, want it to contain %q and no password", c.value, msg, c.want)
		}
	}
}

// --redis-cluster takes the addresses of some of a Redis Cluster's nodes,
// or a URL that names more in addr parameters; a bad value is refused
// naming the flag and the value, the password hidden, and so is giving
// both --redis and --redis-cluster.
func TestRedisClusterFlagTakesAddressesOrAURL(t *testing.T) {
	none := func(string) string { return "" }
	for _, c := range []struct {
		value, password string
		addrs           []string
		tls             bool
	}{
		{value: "10.0.0.1:7000", addrs: []string{"10.0.0.1:7000"}},
		{value: "a:7000,b:7001,[::1]:7002", addrs: []string{"a:7000", "b:7001", "[::1]:7002"}},
		{value: "rediss://:s3cret@a:7000?addr=b:7001&addr=c:7002", password: "s3cret", addrs: []string{"a:7000", "b:7001", "c:7002"}, tls: true},
	} {
		o, err := redisClusterOptions(c.value, none)
		if err != nil {
			t.Errorf("%q: %v", c.value, err)
			continue
		}
		if !slices.Equal(o.Addrs, c.addrs) || o.Password != c.password || (o.TLSConfig != nil) != c.tls || o.PoolSize != serveConns || !o.ContextTimeoutEnabled {
			t.Errorf("%q: addrs %q password %q TLS %v pool %d timeouts %v", c.value, o.Addrs, o.Password, o.TLSConfig != nil, o.PoolSize, o.ContextTimeoutEnabled)
		}
	}
	for _, c := range []struct{ value, want string }{
		{"a:7000,b", `--redis-cluster "a:7000,b": "b" is not host:port`},
		{"a:7000,,b:7001", `--redis-cluster "a:7000,,b:7001": "" is not host:port`},
		{"http://a:7000", `--redis-cluster "http://a:7000": invalid URL scheme: http`},
		{"redis://:s3cret@a:7000?nope=1", `--redis-cluster "redis://:xxxxx@a:7000?nope=1": unexpected option: nope`},
	} {
		_, err := redisClusterOptions(c.value, none)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: error %v; want it to contain %q and no password", c.value, err, c.want)
		}
	}
	var stderr bytes.Buffer
	args := []string{"--config", t.TempDir(), "--redis", "a:6379", "--redis-cluster", "b:7000"}
	if status := serveUntil(context.Background(), args, &bytes.Buffer{}, &stderr); status != 2 || !strings.Contains(stderr.String(), "give one of them") {
		t.Errorf("both flags: status %d, %q; want 2 and an error saying to give one", status, stderr.String())
	}
}

// serve reaches a Redis that wants a password and speaks TLS only, given
// a rediss:// URL and the password in SLIDEGATE_REDIS_PASSWORD, and
// counts in the URL's database; the password is in no line it prints. A
// wrong password is refused at the start, the password hidden.
func TestServeReachesRedisOverTLSWithThePasswordOfTheEnvironment(t *testing.T) {
	const password = "pw-s3cret-42"
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "redis.crt"), filepath.Join(dir, "redis.key")
	writeSelfSigned(t, cert, key)
	tlsPort := freeLoopbackPort(t)
	srv := redistest.Start(t, "--requirepass", password, "--tls-port", strconv.Itoa(tlsPort),
		"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", cert, "--tls-auth-clients", "no")
	url := fmt.Sprintf("rediss://127.0.0.1:%d/3?skip_verify=true", tlsPort)
	// and with a password in the URL, which the environment's replaces
	withPass := fmt.Sprintf("rediss://:url-pass@127.0.0.1:%d/3?skip_verify=true", tlsPort)

	t.Setenv(redisPasswordEnv, "wrong-"+password)
	var stderr syncbuf.Buffer
	if c := serveUntil(context.Background(), []string{"--config", dir, "--redis", url}, &stderr, &stderr); c != 2 {
		t.Fatalf("status %d with a wrong password, want 2: %s", c, stderr.String())
	}
	if out := stderr.String(); !strings.Contains(out, `--redis "`+url+`": `) || strings.Contains(out, password) {
		t.Errorf("with a wrong password: %s", out)
	}

	t.Setenv(redisPasswordEnv, password)
	s := startServe(t, map[string]string{"edge.yaml": edgeConfig}, "--redis", withPass)
	if c := s.ask(t, "edge", "remote_address", "10.0.0.1"); c != rlsv3.RateLimitResponse_OK {
		t.Fatalf("code %v", c)
	}
	body := s.get(t, "/metrics")
	if v, _ := metric(body, "slidegate_ratelimit_redis_healthy"); v != 1 {
		t.Errorf("Redis healthy %v over TLS", v)
	}
	if v, _ := metric(body, "slidegate_ratelimit_redis_failures_total"); v != 0 {
		t.Errorf("%v failures over TLS", v)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Password: password, DB: 3})
	defer rdb.Close()
	keys, err := rdb.Keys(context.Background(), servePrefix+"*").Result()
	if err != nil || len(keys) == 0 {
		t.Errorf("keys of database 3: %v %v", keys, err)
	}
	s.stop()
	if out := s.stderr.String(); strings.Contains(out, password) || !strings.Contains(out, `msg=serving`) ||
		!strings.Contains(out, `redis="`+redactRedis(withPass)+`"`) || strings.Contains(out, "url-pass") {
		t.Errorf("the log names no Redis, or its password:\n%s", out)
	}
}

// freeLoopbackPort returns a loopback port that was free a moment ago.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// writeSelfSigned writes a self-signed certificate for 127.0.0.1 and its
// key, in PEM.
func writeSelfSigned(t *testing.T, certFile, keyFile string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	writeFile(t, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})))
}
