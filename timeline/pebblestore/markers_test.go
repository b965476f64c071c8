package pebblestore

import (
	"slices"
	"testing"
)

func cached(c *markerCache, users ...string) []int64 {
	vals := make([]int64, len(users))
	missing, _ := c.lookup(users, vals)
	for _, i := range missing {
		vals[i] = -1
	}
	return vals
}

// TestMarkerCache: a value read from the engine never replaces one written since the read began,
// nor enters a cache emptied since; the cache never holds more than its max.
func TestMarkerCache(t *testing.T) {
	c := newMarkerCache(3)
	vals := make([]int64, 1)
	_, gen := c.lookup([]string{"a"}, vals) // a push misses a and reads 0 from the engine...
	c.set("a", 5)                           // ...while a create writes a's marker
	c.fill(gen, []string{"a"}, []int64{0})
	if got := cached(c, "a"); got[0] != 5 {
		t.Fatalf("a = %d after a stale fill; want 5", got[0])
	}

	_, gen = c.lookup([]string{"b"}, vals)
	c.set("c", 1)
	c.set("d", 1)
	c.set("e", 1) // the fourth value: the cache empties itself
	c.fill(gen, []string{"b"}, []int64{7})
	if got := cached(c, "a", "b", "d", "e"); !slices.Equal(got, []int64{-1, -1, -1, 1}) {
		t.Fatalf("after emptying, a b d e = %v; want [-1 -1 -1 1] (-1: not cached)", got)
	}

	// A fill that empties the cache itself stops there: a value written since its read began
	// (c's) is forgotten, and the fill's own stale one must not take its place.
	c = newMarkerCache(2)
	_, gen = c.lookup([]string{"a", "b", "c"}, make([]int64, 3))
	c.set("c", 9)
	c.fill(gen, []string{"a", "b", "c"}, []int64{1, 3, 0}) // a fits; b empties the cache
	if got := cached(c, "b", "c"); !slices.Equal(got, []int64{-1, -1}) {
		t.Fatalf("b c = %v after a fill that emptied the cache; want [-1 -1] (not cached)", got)
	}
	if len(c.m) > c.max {
		t.Fatalf("the cache holds %d values; max %d", len(c.m), c.max)
	}

	off := newMarkerCache(-1)
	off.set("a", 5)
	if got := cached(off, "a"); got[0] != -1 {
		t.Fatalf("a cache that is off holds a = %d", got[0])
	}
}

// TestMarkerCacheLoad: a cache loaded with every marker says that a user it has no value for has
// none (no engine read); one loaded with more markers than fit, or emptied since, says nothing of
// the users it lacks.
func TestMarkerCacheLoad(t *testing.T) {
	markers := func(users ...string) func() (string, int64, bool, error) {
		return func() (string, int64, bool, error) {
			if len(users) == 0 {
				return "", 0, false, nil
			}
			u := users[0]
			users = users[1:]
			return u, 5, true, nil
		}
	}
	c := newMarkerCache(3)
	if err := c.load(markers("a", "b", "c")); err != nil {
		t.Fatal(err)
	}
	if got := cached(c, "a", "x"); !slices.Equal(got, []int64{5, 0}) {
		t.Fatalf("loaded whole: a x = %v; want [5 0] (x has no marker)", got)
	}
	c.set("b", 0) // b's timeline deleted
	if !c.none("x") || !c.none("b") || c.none("a") {
		t.Fatalf("loaded whole: none(x, b, a) = %v %v %v; want true true false", c.none("x"), c.none("b"), c.none("a"))
	}
	c.set("d", 7) // the fourth value: the cache empties itself and knows nothing of the others
	if got := cached(c, "a", "d", "x"); !slices.Equal(got, []int64{-1, 7, -1}) {
		t.Fatalf("after emptying, a d x = %v; want [-1 7 -1] (-1: not cached)", got)
	}
	if c.none("x") {
		t.Fatal("after emptying, none(x) = true; the cache no longer knows")
	}

	c = newMarkerCache(3)
	if err := c.load(markers("a", "b", "c", "d")); err != nil {
		t.Fatal(err)
	}
	if got := cached(c, "a", "d", "x"); !slices.Equal(got, []int64{5, -1, -1}) {
		t.Fatalf("loaded in part: a d x = %v; want [5 -1 -1]", got)
	}
	if c.none("x") {
		t.Fatal("loaded in part: none(x) = true; the cache does not know")
	}
}
