// Package tabletest is the conformance suite of table.Table, in the style of testing/fstest: every
// backend runs Run, and a backend is correct only if it passes all of it.
//
//	func TestConformance(t *testing.T) {
//		tabletest.Run(t, func(t testing.TB, cfg tabletest.Config) table.Table { ... })
//	}
//
// The suite holds backends to the contract written on table.Table: outcomes and error Kinds of
// every primitive, conditions, transactions, cursors, TTL, limits, and concurrency.
package tabletest

import (
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/internal/clocktest"
	"github.com/rookery/rookery/table"
)

// Schema is the schema the suite's tables have: two sparse indexes, the first with partitions
// kept as keys only (those starting "LEAN#") and with attribute n alone (those starting "PROJ#").
var Schema = table.Schema{Indexes: []table.Index{
	{Name: "GSI1", PK: "GSI1PK", SK: "GSI1SK", KeysOnly: []string{"LEAN#"},
		Projected: []table.Projection{{Prefix: "PROJ#", Attributes: []string{"n"}}}},
	{Name: "GSI2", PK: "GSI2PK", SK: "GSI2SK"},
}}

// Config is what a backend's factory must honour: the schema to create, the clock that decides TTL
// expiry, and the key that signs cursors.
type Config struct {
	Schema    table.Schema
	Clock     rookery.Clock
	CursorKey []byte
}

// Factory opens an empty table configured as cfg says, and registers its cleanup with t.
type Factory func(t testing.TB, cfg Config) table.Table

// Clock is a settable clock for tests (clocktest.Clock, named here for the suites that use it).
type Clock = clocktest.Clock

// NewClock returns a Clock set to t.
func NewClock(t time.Time) *Clock { return clocktest.New(t) }

// env is one test's table and clock.
type env struct {
	t     *testing.T
	tab   table.Table
	clock *Clock
}

// Run runs the whole suite against tables made by open. Each test gets a fresh table.
func Run(t *testing.T, open Factory) {
	tests := []struct {
		name string
		fn   func(e *env)
	}{
		{"get returns what put wrote, of every value type", testRoundTrip},
		{"get of a missing item is not found and delete of one succeeds", testMissing},
		{"malformed keys and values are invalid", testInvalid},
		{"keys at the length limits work and past them are invalid", testKeyLimits},
		{"keys with unicode and the schema's separators round-trip and sort by bytes", testUnicodeKeys},
		{"an item over 400 KB is too large on every write path", testItemTooLarge},
		{"conditions hold or conflict as documented", testConditions},
		{"a conditional put is idempotent: the repeat conflicts and changes nothing", testConditionalPut},
		{"update sets, removes and adds, creating the item", testUpdate},
		{"update with a version check is optimistic locking", testVersionCheck},
		{"50 goroutines adding to one counter give the exact total", testConcurrentAdd},
		{"batch get returns items in key order with nil for missing", testBatchGet},
		{"query honours every sort-key condition in both directions", testQuerySKConditions},
		{"query pages with cursors to the end", testQueryPaging},
		{"EachPage visits every page once and stops at an error", testEachPage},
		{"query of a secondary index is sparse and follows updates", testIndexQuery},
		{"a keys-only query returns the keys of what the full query returns", testKeysOnly},
		{"a projected query returns the asked attributes and the keys of what the full query returns", testProjection},
		{"partitions kept as keys only or projected answer every query as ones of full copies", testLeanPartitions},
		{"tampered, foreign and malformed cursors are invalid", testBadCursors},
		{"paging while items are inserted concurrently neither repeats nor skips", testCursorConcurrentInserts},
		{"a transaction writes all or nothing and names the failed condition", testTransactAtomic},
		{"transactions of 100 writes work, and larger or duplicate ones are invalid", testTransactLimits},
		{"concurrent transactions keep an invariant across items", testTransactConcurrent},
		{"batches write any number of puts and deletes, and nothing but those", testBatchWrite},
		{"immutable puts written again keep one item and one index entry; immutable deletes remove both", testImmutablePuts},
		{"expired items are invisible at once to every read and condition", testTTL},
		{"ping answers", testPing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := NewClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
			tab := open(t, Config{Schema: Schema, Clock: clock, CursorKey: []byte("tabletest cursor key")})
			tc.fn(&env{t: t, tab: tab, clock: clock})
		})
	}
}
