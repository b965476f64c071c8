package tabletest

import (
	"fmt"
	"testing"
)

func TestPaddedIsZeroPaddedDecimal(t *testing.T) {
	for _, n := range []int64{0, 7, 42, 99_999_999, 100_000_000, 1_700_000_000_123} {
		for _, width := range []int{1, 8, 13} {
			if got, want := Padded(n, width), fmt.Sprintf("%0*d", width, n); got != want {
				t.Errorf("Padded(%d, %d) = %q, want %q", n, width, got, want)
			}
		}
	}
}
