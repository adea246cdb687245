package main

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/redisflow"
)

// The service's cluster (slidegate serve --redis): every instance on one
// Redis shares the windows kept under servePrefix. A decision waits for
// Redis at most serveTimeout, then falls back to the instance's share.
const (
	servePrefix  = "slidegate-rls"
	serveTimeout = 100 * time.Millisecond
	// serveConns is the client's pool: the requests decided at once, each
	// a round trip to Redis per window checked and one to count them.
	serveConns = 256
)

// redisPasswordEnv names the environment variable of Redis's password,
// so that it is not on the command line, where ps shows it.
const redisPasswordEnv = "SLIDEGATE_REDIS_PASSWORD"

// A redisFlag is the value of --redis or --redis-cluster, read.
type redisFlag struct {
	name, value string
	password    string // of the environment, or ""
}

// bad returns an error naming the flag and its value, saying why, the
// password hidden.
func (f redisFlag) bad(why string) error {
	return fmt.Errorf("%s %q: %s", f.name, redactRedis(f.value), redactIn(why, f.value, f.password))
}

// badURL is bad for go-redis's error parsing the flag's URL: without the
// URL, which holds the password, and with an example of a good value.
func (f redisFlag) badURL(err error, example string) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	return f.bad(strings.TrimPrefix(err.Error(), "redis: ") + ": write " + example)
}

// isHostPort reports whether a is host:port, the port from 1 to 65535.
func isHostPort(a string) bool {
	_, port, err := net.SplitHostPort(a)
	n, perr := strconv.Atoi(port)
	return err == nil && perr == nil && n >= 1 && n <= 65535
}

// redisOptions reads the value of --redis: host:port, or a URL
// (redis://user:password@host:port/db, rediss:// for TLS, with go-redis's
// query options), the password of getenv(redisPasswordEnv) replacing the
// URL's if set. Its error names the flag and the value, the password
// hidden.
func redisOptions(value string, getenv func(string) string) (*redis.Options, error) {
	f := redisFlag{name: "--redis", value: value, password: getenv(redisPasswordEnv)}
	o := &redis.Options{Addr: value}
	switch {
	case strings.Contains(value, "://"):
		var err error
		if o, err = redis.ParseURL(value); err != nil {
			return nil, f.badURL(err, "host:port, or a URL such as redis://user@host:6379/0 (rediss:// for TLS)")
		}
	case !isHostPort(value):
		return nil, f.bad("not host:port nor a redis:// or rediss:// URL")
	}
	if f.password != "" {
		o.Password = f.password
	}
	o.ContextTimeoutEnabled = true // the cluster's timeout bounds each call
	o.PoolSize = cmp.Or(o.PoolSize, serveConns)
	return o, nil
}

// redisClusterOptions reads the value of --redis-cluster: the addresses
// of some of a Redis Cluster's nodes, host:port,host:port..., or a URL
// (redis://user:password@host:port?addr=host:port&addr=..., rediss:// for
// TLS, with go-redis's query options), the password of
// getenv(redisPasswordEnv) replacing the URL's if set. Its error names the
// flag and the value, the password hidden.
func redisClusterOptions(value string, getenv func(string) string) (*redis.ClusterOptions, error) {
	f := redisFlag{name: "--redis-cluster", value: value, password: getenv(redisPasswordEnv)}
	o := &redis.ClusterOptions{}
	if strings.Contains(value, "://") {
		var err error
		if o, err = redis.ParseClusterURL(value); err != nil {
			return nil, f.badURL(err, "host:port,host:port, or a URL such as redis://user@host:6379?addr=host2:6379 (rediss:// for TLS)")
		}
	} else {
		for _, a := range strings.Split(value, ",") {
			if !isHostPort(a) {
				return nil, f.bad(fmt.Sprintf("%q is not host:port; write host:port,host:port, or a redis:// or rediss:// URL", a))
			}
			o.Addrs = append(o.Addrs, a)
		}
	}
	if f.password != "" {
		o.Password = f.password
	}
	o.ContextTimeoutEnabled = true // the cluster's timeout bounds each call
	o.PoolSize = cmp.Or(o.PoolSize, serveConns)
	return o, nil
}

// passwordIn returns where the password of the user information of a
// --redis value lies, value[i:j], whether or not the value parses; ok is
// false if it has none.
func passwordIn(value string) (i, j int, ok bool) {
	rest := value
	if _, after, found := strings.Cut(value, "://"); found {
		rest = after
	}
	host := rest
	if k := strings.IndexAny(rest, "/?#"); k >= 0 {
		host = rest[:k]
	}
	at := strings.LastIndex(host, "@")
	colon := strings.Index(host, ":")
	if at < 0 || colon < 0 || colon > at {
		return 0, 0, false
	}
	off := len(value) - len(rest)
	return off + colon + 1, off + at, true
}

// redactRedis returns the value of --redis with its password, if any,
// replaced by xxxxx, as net/url's URL.Redacted does.
func redactRedis(value string) string {
	i, j, ok := passwordIn(value)
	if !ok {
		return value
	}
	return value[:i] + "xxxxx" + value[j:]
}

// redactIn returns s with each secret, and the password of value, as
// written and decoded, replaced by xxxxx.
func redactIn(s, value string, secrets ...string) string {
	if i, j, ok := passwordIn(value); ok {
		secrets = append(secrets, value[i:j])
		if dec, err := url.PathUnescape(value[i:j]); err == nil {
			secrets = append(secrets, dec)
		}
	}
	for _, x := range secrets {
		if x != "" {
			s = strings.ReplaceAll(s, x, "xxxxx")
		}
	}
	return s
}

// A redisClient is a client of one Redis or of a Redis Cluster.
type redisClient interface {
	redis.Scripter
	Close() error
}

// joinServeCluster returns the service's cluster over rdb, and what closes
// both. Its fallback's per-key windows hold at most mem bytes in all.
// flag and value are the flag that named the Redis and its value,
// named in an error, its password and password hidden. A Redis that cannot
// be reached is no error: the cluster falls back until it can. One that
// refuses the cluster's commands (a password, the ACL) is, as redisflow.New
// says.
func joinServeCluster(rdb redisClient, flag, value, password string, mem int64, log *slog.Logger) (*redisflow.Cluster, func(), error) {
	quietRedis.Do(func() { redis.SetLogger(discardRedisLog{}) })
	km, err := flow.NewKeyMemory(mem)
	if err != nil {
		return nil, nil, err
	}
	c, err := redisflow.New(rdb, redisflow.WithPrefix(servePrefix), redisflow.WithTimeout(serveTimeout),
		redisflow.WithFallback(redisflow.Local), redisflow.WithKeyMemory(km), redisflow.WithLogger(log))
	if err != nil {
		_ = rdb.Close()
		return nil, nil, fmt.Errorf("%s %q: %s", flag, redactRedis(value), redactIn(err.Error(), value, password))
	}
	return c, func() { _ = c.Close(); _ = rdb.Close() }, nil
}

// serveRedis returns the service's cluster as --redis or --redis-cluster
// (one of them not empty) ask, its fallback within mem bytes, and what
// closes it.
func serveRedis(single, cluster string, mem int64, log *slog.Logger) (*redisflow.Cluster, func(), error) {
	if single != "" && cluster != "" {
		return nil, nil, errors.New("--redis and --redis-cluster: give one of them")
	}
	if cluster != "" {
		o, err := redisClusterOptions(cluster, os.Getenv)
		if err != nil {
			return nil, nil, err
		}
		return joinServeCluster(redis.NewClusterClient(o), "--redis-cluster", cluster, o.Password, mem, log)
	}
	o, err := redisOptions(single, os.Getenv)
	if err != nil {
		return nil, nil, err
	}
	return joinServeCluster(redis.NewClient(o), "--redis", single, o.Password, mem, log)
}
