package pebblekit_test

import (
	"testing"

	"github.com/rookery/rookery/internal/pebblekit"
)

// TestSpacesAreDistinct: no two owners of a shared engine write keys with the same first byte, and
// no space's upper bound (the next byte) is another owner's space that an iteration of the whole
// space would read into.
func TestSpacesAreDistinct(t *testing.T) {
	owner := map[byte]string{}
	for _, s := range pebblekit.Spaces {
		if o, ok := owner[s.Byte]; ok {
			t.Fatalf("space %q is %s's and %s's", s.Byte, o, s.Owner)
		}
		owner[s.Byte] = s.Owner
	}
	if len(owner) != 12 {
		t.Fatalf("%d spaces listed; the constants declare 12", len(owner))
	}
}
