package cache_test

import (
	"testing"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/cache"
	"github.com/rookery/rookery/cache/cachetest"
)

func TestMemory(t *testing.T) {
	cachetest.Run(t, func(t *testing.T) cachetest.Impl { return cache.NewMemory(rookery.SystemClock, 0) })
}
