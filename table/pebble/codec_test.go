package pebble

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rookery/rookery/table"
)

// FuzzKeyOrder: the encoding of (PK, SK) pairs sorts exactly as the pairs do, part by part, and
// decodes back to them; this is what makes range scans and cursors right.
func FuzzKeyOrder(f *testing.F) {
	f.Add("a", "b", "a", "c")
	f.Add("a\x00", "", "a", "\x00")
	f.Add("USER#1", "META", "USER#1#x", "META")
	f.Add("\x00\xff", "\x00\x01", "\x00", "\xff")
	f.Fuzz(func(t *testing.T, pk1, sk1, pk2, sk2 string) {
		k1, k2 := baseKey(table.Key{PK: pk1, SK: sk1}), baseKey(table.Key{PK: pk2, SK: sk2})
		want := strings.Compare(pk1, pk2)
		if want == 0 {
			want = strings.Compare(sk1, sk2)
		}
		if got := bytes.Compare(k1, k2); got != want {
			t.Fatalf("(%q,%q) vs (%q,%q): encoding compares %d, keys %d", pk1, sk1, pk2, sk2, got, want)
		}
		pk, rest, err := readPart(k1[1:])
		if err != nil {
			t.Fatal(err)
		}
		sk, rest, err := readPart(rest)
		if err != nil || pk != pk1 || sk != sk1 || len(rest) != 0 {
			t.Fatalf("decoded (%q,%q,%q,%v); want (%q,%q)", pk, sk, rest, err, pk1, sk1)
		}
	})
}
