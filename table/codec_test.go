package table

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzDecodeItem: decoding arbitrary bytes never panics, and what encodes decodes to itself.
func FuzzDecodeItem(f *testing.F) {
	f.Add(AppendItem(nil, Item{"PK": "a", "SK": "b", "n": int64(-3), "t": true, "y": []byte{0}, "l": []string{"x", ""}}))
	f.Add([]byte{0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		it, err := DecodeItem(b)
		if err != nil {
			return
		}
		again, err := DecodeItem(AppendItem(nil, it))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(it, again); diff != "" {
			t.Fatalf("re-encoding changed the item:\n%s", diff)
		}
	})
}
