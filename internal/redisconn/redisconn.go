// Package redisconn owns how outerloop reaches Redis: it turns a Redis URL into a go-redis
// client and asynq's connection option that point at the same server, for a single server
// (redis:// and rediss://, go-redis's own URL format) or for Redis Sentinel
// (redis-sentinel://), so that every component (store, queue, workers, scheduler) follows a
// failover alike. It also waits for Redis at start instead of failing, and routes go-redis's
// own log lines to slog.
//
// The Sentinel URL:
//
//	redis-sentinel://[[user]:password@]host1:26379[,host2:26379...][/db]?master=NAME[&sentinel_password=P]
//
// The hosts are the sentinels; master names the monitored primary; the userinfo is the
// password (and user) of the Redis servers; sentinel_password, when the sentinels have one.
package redisconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// SentinelScheme is the URL scheme of a Redis Sentinel deployment.
const SentinelScheme = "redis-sentinel"

// Conn is a parsed Redis URL.
type Conn struct {
	single   *redis.Options         // redis:// or rediss://
	failover *redis.FailoverOptions // redis-sentinel://
}

// Parse parses a Redis URL (see the package doc). The error names what is wrong, never the
// password.
func Parse(raw string) (*Conn, error) {
	if !strings.HasPrefix(raw, SentinelScheme+"://") {
		o, err := redis.ParseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("redisconn: redis URL: %w", err)
		}
		return &Conn{single: o}, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("redisconn: redis-sentinel URL does not parse")
	}
	fo := &redis.FailoverOptions{}
	for _, h := range strings.Split(u.Host, ",") {
		if host, port, err := net.SplitHostPort(h); err != nil || host == "" || port == "" {
			return nil, fmt.Errorf("redisconn: redis-sentinel URL: sentinel %q is not host:port", h)
		}
		fo.SentinelAddrs = append(fo.SentinelAddrs, h)
	}
	if u.User != nil {
		fo.Username = u.User.Username()
		fo.Password, _ = u.User.Password()
	}
	switch p := strings.Trim(u.Path, "/"); {
	case p == "":
	default:
		db, err := strconv.Atoi(p)
		if err != nil || db < 0 {
			return nil, fmt.Errorf("redisconn: redis-sentinel URL: database %q is not a number", p)
		}
		fo.DB = db
	}
	q := u.Query()
	for k := range q {
		switch k {
		case "master", "sentinel_password", "tls":
		default:
			return nil, fmt.Errorf("redisconn: redis-sentinel URL: unknown parameter %q (want master, sentinel_password, tls)", k)
		}
	}
	fo.MasterName = q.Get("master")
	if fo.MasterName == "" {
		return nil, errors.New("redisconn: redis-sentinel URL: no master=NAME (the name the sentinels monitor)")
	}
	fo.SentinelPassword = q.Get("sentinel_password")
	if q.Get("tls") == "true" {
		fo.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return &Conn{failover: fo}, nil
}

// Sentinel reports whether the URL names a Sentinel deployment.
func (c *Conn) Sentinel() bool { return c.failover != nil }

// Describe says where Redis is, for logs and errors (no password).
func (c *Conn) Describe() string {
	if c.failover != nil {
		return fmt.Sprintf("master %q via sentinels %s", c.failover.MasterName, strings.Join(c.failover.SentinelAddrs, ","))
	}
	return c.single.Addr
}

// Client returns a new go-redis client: a FailoverClient for Sentinel.
func (c *Conn) Client() redis.UniversalClient {
	if c.failover != nil {
		fo := *c.failover
		return redis.NewFailoverClient(&fo)
	}
	o := *c.single
	return redis.NewClient(&o)
}

// AsynqOpt returns asynq's option for the same Redis.
func (c *Conn) AsynqOpt() asynq.RedisConnOpt {
	if f := c.failover; f != nil {
		return asynq.RedisFailoverClientOpt{MasterName: f.MasterName, SentinelAddrs: f.SentinelAddrs,
			SentinelPassword: f.SentinelPassword, Username: f.Username, Password: f.Password, DB: f.DB, TLSConfig: f.TLSConfig}
	}
	o := c.single
	return asynq.RedisClientOpt{Addr: o.Addr, DB: o.DB, Username: o.Username, Password: o.Password, TLSConfig: o.TLSConfig}
}

// WaitDelay is the pause before try n+1 to reach Redis at start: 500ms·2^(n-1), at most 30s,
// with ±10% jitter.
func WaitDelay(n int) time.Duration {
	d := 30 * time.Second
	if n < 7 {
		d = min(d, 500*time.Millisecond<<(n-1))
	}
	return time.Duration(float64(d) * (0.9 + 0.2*rand.Float64()))
}

// Wait pings rdb until it answers or ctx ends, logging each failure with the next try's delay,
// so that a process started before Redis (or during an outage) waits instead of exiting.
// after paces the retries (a clock's After).
func Wait(ctx context.Context, rdb redis.UniversalClient, where string, log *slog.Logger, after func(time.Duration) <-chan time.Time) error {
	for n := 1; ; n++ {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := rdb.Ping(pctx).Err()
		cancel()
		if err == nil {
			if n > 1 {
				log.Info("redis answers", "redis", where, "tries", n)
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("redisconn: redis at %s did not answer: %w", where, err)
		}
		d := WaitDelay(n)
		log.Warn("redis does not answer; waiting", "redis", where, "try", n, "retry_in", d, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("redisconn: redis at %s did not answer: %w", where, err)
		case <-after(d):
		}
	}
}

// SlogLogger adapts slog to go-redis's logger (redis.SetLogger), so that its own lines (pool
// and sentinel messages) join the structured log instead of plain text on stderr.
type SlogLogger struct{ L *slog.Logger }

// Printf implements go-redis's internal.Logging.
func (s SlogLogger) Printf(ctx context.Context, format string, v ...any) {
	s.L.WarnContext(ctx, fmt.Sprintf(format, v...), "component", "go-redis")
}
