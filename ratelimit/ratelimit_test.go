package ratelimit_test

import (
	"testing"
	"time"

	"github.com/rookery/rookery/ratelimit"
	"github.com/rookery/rookery/ratelimit/ratelimittest"
)

func TestMemory(t *testing.T) {
	ratelimittest.Run(t, ratelimit.NewMemory(nil), "t:")
}

func TestParsePolicy(t *testing.T) {
	for in, want := range map[string]ratelimit.Policy{
		"600/1m": {Quota: 600, Window: time.Minute}, " 10/1s ": {Quota: 10, Window: time.Second},
		"off": {}, "0": {},
	} {
		if got, err := ratelimit.ParsePolicy(in); err != nil || got != want {
			t.Errorf("ParsePolicy(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "600", "600/", "/1m", "-1/1m", "600/1ms", "a/1m", "600/1x"} {
		if _, err := ratelimit.ParsePolicy(bad); err == nil {
			t.Errorf("ParsePolicy(%q) accepted", bad)
		}
	}
}
