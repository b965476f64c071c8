package cache_test

import (
	"testing"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/cache"
	"github.com/rookery/rookery/cache/cachetest"
)

func TestMemory(t *testing.T) {
	cachetest.Run(t, func(t *testing.T, clock rookery.Clock) cachetest.Impl { return cache.NewMemory(clock, 0) })
}
