package main

import (
	"fmt"

	goredis "github.com/redis/go-redis/v9"
	"github.com/spf13/pflag"

	"github.com/rookery/rookery/httpapi"
	"github.com/rookery/rookery/ratelimit"
	rlredis "github.com/rookery/rookery/ratelimit/redis"
	tlredis "github.com/rookery/rookery/timeline/redis"
)

// rateLimitsConfig are the rate limits of the API's routes (docs/api.md, "Rate limits").
type rateLimitsConfig struct {
	read, write, expensive, server, anonymous string
	trustedProxies                            []string
}

func (c *rateLimitsConfig) addFlags(f *pflag.FlagSet) {
	const form = " (QUOTA/WINDOW, such as 600/1m: the quota may be spent at once, then it comes back at QUOTA per WINDOW; off: no limit)"
	f.StringVar(&c.read, "rate-read", "1200/1m", "requests a user may read (GET) with their token"+form)
	f.StringVar(&c.write, "rate-write", "300/1m", "requests a user may write (POST, PUT, PATCH, DELETE) with their token"+form)
	f.StringVar(&c.expensive, "rate-expensive", "120/1m", "pages past the first a user may read of their feed, a tag's or an author's posts"+form)
	f.StringVar(&c.server, "rate-server", "600000/1m", "requests of every class a server token may make (one bucket per token subject: it acts for many users)"+form)
	f.StringVar(&c.anonymous, "rate-anonymous", "120/1m", "requests without a valid token one client address may make (each answered 401)"+form)
	f.StringSliceVar(&c.trustedProxies, "trusted-proxies", nil, "load balancers or proxies in front of the API (addresses or CIDR prefixes, comma-separated, such as 10.0.0.0/8): from them, the client address is the rightmost untrusted one of X-Forwarded-For; none by default (the connection's peer is the client)")
}

// limits returns the HTTP server's rate limits, counted in this process (--cache memory) or in
// Redis (--cache redis: shared by every API process).
func (c *rateLimitsConfig) limits(cache, redisAddr, prefix string) (*httpapi.RateLimits, error) {
	l := &httpapi.RateLimits{}
	for _, x := range []struct {
		flag, v string
		p       *ratelimit.Policy
	}{{"rate-read", c.read, &l.Read}, {"rate-write", c.write, &l.Write}, {"rate-expensive", c.expensive, &l.Expensive},
		{"rate-server", c.server, &l.Server}, {"rate-anonymous", c.anonymous, &l.Anonymous}} {
		p, err := ratelimit.ParsePolicy(x.v)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", x.flag, err)
		}
		*x.p = p
	}
	for _, s := range c.trustedProxies {
		p, err := httpapi.ParseTrustedProxy(s)
		if err != nil {
			return nil, fmt.Errorf("--trusted-proxies: %q is not an address or a CIDR prefix such as 10.0.0.0/8", s)
		}
		l.TrustedProxies = append(l.TrustedProxies, p)
	}
	switch cache {
	case "redis":
		l.Limiter = rlredis.New(goredis.NewUniversalClient(tlredis.ClientOptions(splitAddrs(redisAddr))), prefix+":rl")
	default:
		l.Limiter = ratelimit.NewMemory(nil)
	}
	return l, nil
}
