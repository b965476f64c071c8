package pebble

import (
	"strings"

	"github.com/rookery/rookery/internal/keylock"
	"github.com/rookery/rookery/table"
)

// newKeyLocks returns the item locks of a DB: a write holds the locks of its keys from reading the
// current items until its batch is committed (synced), so that read-check-write is atomic per key.
// Only writes to the same key wait for each other; a transaction takes its keys' locks in key order,
// so transactions cannot deadlock.
func newKeyLocks() *keylock.Set[table.Key] {
	return &keylock.Set[table.Key]{Compare: func(a, b table.Key) int {
		if c := strings.Compare(a.PK, b.PK); c != 0 {
			return c
		}
		return strings.Compare(a.SK, b.SK)
	}}
}
