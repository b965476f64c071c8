// Package table defines the table primitives that all of Rookery's durable state is written with:
// the single-table design of the seeds, behind one small interface with two backends (pebble,
// embedded; dynamo, AWS DynamoDB). Nothing above this package knows which backend it has.
//
// The interface is deliberately DynamoDB's own shape — items addressed by a partition key (PK) and a
// sort key (SK), sparse secondary indexes named in a Schema, conditional writes, transactions of up
// to 100 items, TTL — so that everything written against it runs unchanged on DynamoDB, and Pebble
// is held to the same semantics by the conformance suite in tabletest.
//
// # Consistency
//
// Reads of the base table (Get, BatchGet, Query with Index "") are strongly consistent on both
// backends: they see every write acknowledged before they started.
//
// Reads of a secondary index are strongly consistent on Pebble (index entries are written in the
// same atomic batch as their item) but only eventually consistent on DynamoDB, where global
// secondary indexes are updated asynchronously, usually within a second. Layers above may assume
// only this of an index Query:
//   - it may miss items written very recently and may still return items deleted or changed very
//     recently (with their old attributes);
//   - it never returns an item that never existed, and never returns a torn item;
//   - a cursor never repeats an item within one listing.
//
// So: decisions that must be exact (uniqueness, "does A follow B", idempotency, counters) use the
// base table with Get and conditions, never an index; index queries serve listings, and a listing
// that must hide deleted items re-checks them against the base table (BatchGet) or tolerates the
// lag. Transactions and conditions are evaluated against the base table only.
//
// # Values
//
// An Item maps attribute names to values of these Go types only: string, int64, bool, []byte and
// []string. (int is accepted on writes and stored as int64.) Numbers are 64-bit integers; Update's
// Add is exact on both backends.
package table

import (
	"context"
	"slices"
	"strings"
)

// Reserved attribute names.
const (
	// PK and SK hold every item's partition key and sort key. Both are non-empty strings.
	PK = "PK"
	SK = "SK"
	// TTL, when present, is the item's expiry time in Unix seconds (int64). An item whose TTL is at
	// or before the backend clock's current second is expired: every read treats it as absent at
	// once, conditions see it as absent, and the backend removes it in the background.
	TTL = "ttl"
)

// Limits, the same on both backends (they are DynamoDB's).
const (
	MaxPKBytes    = 2048       // longest partition key, in UTF-8 bytes
	MaxSKBytes    = 1024       // longest sort key, in UTF-8 bytes
	MaxItemBytes  = 400 * 1024 // largest item, counted as DynamoDB counts it (see ItemSize)
	MaxBatchGet   = 100        // most keys in one BatchGet
	MaxTransact   = 100        // most writes in one TransactWrite
	MaxQueryLimit = 1000       // most items in one Query page
	// DefaultQueryLimit is the page size of a Query with Limit 0.
	DefaultQueryLimit = 100
)

// Key addresses one item of the base table.
type Key struct {
	PK, SK string
}

// Item is one item: attribute name -> value (see the package doc for the value types).
type Item map[string]any

// Key returns the item's primary key.
func (it Item) Key() Key {
	pk, _ := it[PK].(string)
	sk, _ := it[SK].(string)
	return Key{PK: pk, SK: sk}
}

// String returns the string attribute name, or "" if it is absent or not a string.
func (it Item) String(name string) string { s, _ := it[name].(string); return s }

// Int returns the number attribute name, or 0 if it is absent or not a number.
func (it Item) Int(name string) int64 { n, _ := it[name].(int64); return n }

// Bool returns the bool attribute name, or false if it is absent or not a bool.
func (it Item) Bool(name string) bool { b, _ := it[name].(bool); return b }

// Bytes returns the binary attribute name, or nil if it is absent or not binary.
func (it Item) Bytes(name string) []byte { b, _ := it[name].([]byte); return b }

// Strings returns the string-list attribute name, or nil if it is absent or not a list.
func (it Item) Strings(name string) []string { l, _ := it[name].([]string); return l }

// Index describes a secondary index: the attributes that hold its partition and sort key. An item
// is in the index only if it has both attributes (the index is sparse, as on DynamoDB); both must
// then be non-empty strings.
type Index struct {
	Name string
	PK   string
	SK   string
	// KeysOnly names the index partitions (by prefixes of their partition key) whose entries a
	// store may keep as keys alone, as DynamoDB's KEYS_ONLY projection does for a whole index:
	// a query of such a partition returns what it would with full copies, its items read from the
	// table. It suits partitions written far more often than their items are read through the
	// index. A store may ignore it (the DynamoDB store projects every attribute everywhere).
	KeysOnly []string
	// Projected names index partitions (by prefixes of their partition key) whose entries a store
	// may keep with a few of the items' attributes, as DynamoDB's INCLUDE projection does for a
	// whole index: a query of such a partition returns what it would with full copies, answered
	// from the entries when it asks for a projection (Query.Attributes) within theirs, and with
	// its items read from the table otherwise. It suits partitions of large items listed through
	// the index by a few attributes. A store may ignore it, as it may KeysOnly.
	Projected []Projection
}

// Projection is a partition of an index whose entries keep Attributes besides the keys (the
// table's and the index's) and the TTL.
type Projection struct {
	Prefix     string // of the partition keys
	Attributes []string
}

// KeysOnlyPartition reports whether the index's partition pk is one KeysOnly names.
func (ix Index) KeysOnlyPartition(pk string) bool {
	for _, p := range ix.KeysOnly {
		if strings.HasPrefix(pk, p) {
			return true
		}
	}
	return false
}

// ProjectionOf returns the attributes the entries of the index's partition pk keep besides the
// keys and the TTL, if Projected names it.
func (ix Index) ProjectionOf(pk string) ([]string, bool) {
	for _, p := range ix.Projected {
		if strings.HasPrefix(pk, p.Prefix) {
			return p.Attributes, true
		}
	}
	return nil, false
}

// Covers reports whether the entries of the index's partition pk answer a query of it for attrs:
// the partition is not projected, or attrs is a projection (not empty) within the entries'.
func (ix Index) Covers(pk string, attrs []string) bool {
	kept, ok := ix.ProjectionOf(pk)
	if !ok {
		return true
	}
	if len(attrs) == 0 {
		return false
	}
	for _, a := range attrs {
		if !slices.Contains(kept, a) && a != PK && a != SK && a != TTL && a != ix.PK && a != ix.SK {
			return false
		}
	}
	return true
}

// Schema lists a table's secondary indexes. The schema itself (which entity uses which index) is
// Rookery's key-schema file; backends only need the attribute names.
type Schema struct {
	Indexes []Index
}

// Index returns the index called name.
func (s Schema) Index(name string) (Index, bool) {
	for _, ix := range s.Indexes {
		if ix.Name == name {
			return ix, true
		}
	}
	return Index{}, false
}

// Table is the set of primitives Rookery's durable state is written with. Implementations are safe
// for concurrent use. Every method returns errors of type *rookery.Error with one of the Kinds
// named in its doc; in addition any method may return Unavailable (the engine is down, throttling,
// or timed out: safe to retry), the context's error wrapped with Kind Unavailable when ctx ends, and
// Internal for an unexpected engine failure.
type Table interface {
	// Get returns the item with key k. Three things might happen: the item exists and is not
	// expired, and it is returned; it does not exist or has expired, and the error has Kind
	// NotFound; or k is malformed (empty or too-long key), and the error has Kind Invalid.
	Get(ctx context.Context, k Key) (Item, error)

	// BatchGet returns the items with the given keys, in the same order, with nil for each key
	// whose item does not exist or has expired. Keys may repeat. More than MaxBatchGet keys, or a
	// malformed key, is Invalid. It retries partial results internally until every key is answered
	// or ctx ends; it never returns a partial result without an error.
	BatchGet(ctx context.Context, keys []Key) ([]Item, error)

	// Put writes item whole, replacing any item with the same key, if every condition holds against
	// the current item (an expired item counts as absent). A condition that does not hold is
	// Conflict and writes nothing. An item without PK and SK, with a value of an unsupported type,
	// with an empty index key, or with keys over the limits is Invalid; an item over MaxItemBytes is
	// TooLarge.
	Put(ctx context.Context, item Item, conds ...Cond) error

	// Update changes the item with key k as u says, creating it if it does not exist (an expired
	// item counts as absent and is replaced), if every condition holds; it returns the item as it is
	// after the update. A condition that does not hold is Conflict and changes nothing. Changing PK
	// or SK, adding to a non-number, or a malformed update is Invalid; a result over MaxItemBytes is
	// TooLarge.
	Update(ctx context.Context, k Key, u Update, conds ...Cond) (Item, error)

	// Delete removes the item with key k if every condition holds; removing an absent item is a
	// success. A condition that does not hold is Conflict and removes nothing.
	Delete(ctx context.Context, k Key, conds ...Cond) error

	// Query returns one page of the items in one partition of the base table (q.Index == "") or of
	// a secondary index, ordered by sort key (ties in an index broken by the item's key), ascending
	// or descending, restricted by q.SK, skipping expired items. Page.Next is "" when there are no
	// more items and otherwise a cursor for the next page. Paging with cursors while items are
	// written never repeats an item and never skips an item that existed, unchanged, throughout.
	// An unknown index, a limit outside 0..MaxQueryLimit or a malformed sort-key condition is
	// Invalid; a cursor that was tampered with, is malformed, or belongs to another query is Invalid.
	Query(ctx context.Context, q Query) (Page, error)

	// TransactWrite applies every write or none, atomically: no reader sees some of them without the
	// others. If any write's conditions do not hold, nothing is written and the error has Kind
	// Conflict and wraps a *ConditionError naming the first write that failed. More than
	// MaxTransact writes, two writes to the same key, or a malformed write is Invalid; an item over
	// MaxItemBytes is TooLarge.
	TransactWrite(ctx context.Context, writes []Write) error

	// BatchWrite applies puts and deletes without conditions, each atomically on its own but not
	// together: a reader may see some before others, and after an error some may have been applied
	// and others not. It is for writes each of which stands alone and may be repeated (timeline
	// entries): on DynamoDB it costs half the write units of a transaction. Any number of writes
	// (the backend sends them in chunks); an update, a condition check, a write with a condition,
	// two writes to one key, or a malformed write is Invalid; an item over MaxItemBytes is TooLarge.
	BatchWrite(ctx context.Context, writes []Write) error

	// Ping checks that the engine answers; /readyz calls it.
	Ping(ctx context.Context) error

	// Close releases the table's resources; acknowledged writes are durable before and after it.
	Close() error
}

// Update says how Update changes an item: Set attributes to values, Remove attributes, and Add a
// number to numeric attributes (an absent attribute counts as 0). An attribute may appear in only
// one of the three.
type Update struct {
	Set    map[string]any
	Remove []string
	Add    map[string]int64
}

// CondOp is the test a Cond applies.
type CondOp uint8

const (
	OpExists    CondOp = iota + 1 // the attribute exists
	OpNotExists                   // the attribute does not exist (true for an absent item)
	OpEq                          // the attribute equals Value
	OpNe                          // the attribute exists and does not equal Value
	OpLt                          // the attribute is less than Value (same type: string or number)
	OpLe
	OpGt
	OpGe
)

// Cond is one condition on the current item; the conditions of a write must all hold. A comparison
// with an attribute that is absent, or of another type, does not hold.
type Cond struct {
	Attr  string
	Op    CondOp
	Value any
}

// Exists is the condition that attr exists; Exists(PK) means "the item exists".
func Exists(attr string) Cond { return Cond{Attr: attr, Op: OpExists} }

// NotExists is the condition that attr does not exist; NotExists(PK) means "the item does not
// exist", the conditional put of seed 000 (B7: idempotent likes).
func NotExists(attr string) Cond { return Cond{Attr: attr, Op: OpNotExists} }

// Compare is the condition "attr op value", with op one of OpEq..OpGe.
func Compare(attr string, op CondOp, value any) Cond { return Cond{Attr: attr, Op: op, Value: value} }

// VersionIs is the optimistic-locking check: the number attribute attr equals version, or, when
// version is 0, the attribute does not exist yet.
func VersionIs(attr string, version int64) Cond {
	if version == 0 {
		return NotExists(attr)
	}
	return Compare(attr, OpEq, version)
}

// SKOp is a sort-key condition of a Query.
type SKOp uint8

const (
	SKAll        SKOp = iota // the whole partition
	SKEq                     // SK == Value
	SKBeginsWith             // SK starts with Value
	SKBetween                // Value <= SK <= Value2
	SKLt                     // SK < Value
	SKLe                     // SK <= Value
	SKGt                     // SK > Value
	SKGe                     // SK >= Value
)

// SKCond restricts a Query's sort keys. The zero SKCond selects the whole partition.
type SKCond struct {
	Op            SKOp
	Value, Value2 string
}

// Query asks for one page of one partition.
type Query struct {
	Index  string // "" for the base table, or an index of the Schema
	PK     string // the partition key value (of the index, for an index query)
	SK     SKCond
	Desc   bool   // newest-first listings query descending
	Limit  int    // 0 means DefaultQueryLimit
	Cursor string // "" for the first page, else a previous Page.Next of the same query
	// KeysOnly fills Page.Keys, the items' keys (PK and SK, on an index query too), instead of
	// Page.Items (DynamoDB's KEYS_ONLY projection; seed 004 §3.2), for a caller that needs nothing
	// else, as fan-out reading followers from the index does: a backend need not decode the items.
	// Pages, cursors and expiry are as without it.
	KeysOnly bool
	// Attributes, if not empty, is the projection of the items a query returns: each carries only
	// these attributes (those it has) and its key attributes, the table's and, on an index query,
	// the index's (DynamoDB's ProjectionExpression), for a caller that needs a few attributes of
	// large items, as the read path's listing of an author's newest posts does. Pages, cursors and
	// expiry are as without it. Ignored with KeysOnly.
	Attributes []string
}

// Page is one page of a Query.
type Page struct {
	Items []Item
	Keys  []Key  // instead of Items, with Query.KeysOnly
	Next  string // "" on the last page
}

// WriteKind is the kind of one write of a transaction.
type WriteKind uint8

const (
	WritePut WriteKind = iota + 1
	WriteUpdate
	WriteDelete
	WriteCheck // a condition check on an item that is not written
)

// Write is one write of a transaction: build it with PutWrite, UpdateWrite, DeleteWrite or
// CheckWrite.
type Write struct {
	Kind   WriteKind
	Item   Item   // WritePut; an immutable WriteDelete
	Key    Key    // WriteUpdate, WriteDelete, WriteCheck
	Update Update // WriteUpdate
	Conds  []Cond
	// Immutable (a put or delete without conditions only) promises that an item already stored at
	// this key, if any, has the same index key attributes and TTL as Item: the item is a pure
	// function of its key, as a timeline entry or an outbox event is. A backend may then skip
	// reading the old item. Breaking the promise leaves stale index entries.
	Immutable bool
}

// PutWrite is a transactional Put.
func PutWrite(item Item, conds ...Cond) Write { return Write{Kind: WritePut, Item: item, Conds: conds} }

// ImmutablePutWrite is a transactional Put of an item that is a pure function of its key (see
// Write.Immutable).
func ImmutablePutWrite(item Item) Write { return Write{Kind: WritePut, Item: item, Immutable: true} }

// ImmutableDeleteWrite is a transactional Delete of item, an item that is a pure function of its
// key (see Write.Immutable), such as one the caller read; a missing item is no error, as with
// DeleteWrite.
func ImmutableDeleteWrite(item Item) Write {
	return Write{Kind: WriteDelete, Key: item.Key(), Item: item, Immutable: true}
}

// UpdateWrite is a transactional Update.
func UpdateWrite(k Key, u Update, conds ...Cond) Write {
	return Write{Kind: WriteUpdate, Key: k, Update: u, Conds: conds}
}

// DeleteWrite is a transactional Delete.
func DeleteWrite(k Key, conds ...Cond) Write { return Write{Kind: WriteDelete, Key: k, Conds: conds} }

// CheckWrite makes the transaction depend on conditions of an item it does not write.
func CheckWrite(k Key, conds ...Cond) Write { return Write{Kind: WriteCheck, Key: k, Conds: conds} }

// key returns the key that w writes or checks.
func (w Write) key() Key {
	if w.Kind == WritePut {
		return w.Item.Key()
	}
	return w.Key
}

// ConditionError is wrapped by the Conflict error of a transaction whose conditions did not hold.
type ConditionError struct {
	Index int // the position in the transaction of the write whose condition failed
}

func (e *ConditionError) Error() string {
	return "condition failed on write " + itoa(e.Index) + " of the transaction"
}

// Add atomically adds delta to the number attribute attr of the item with key k (creating the item
// and the attribute as needed) and returns the new value.
func Add(ctx context.Context, t Table, k Key, attr string, delta int64) (int64, error) {
	it, err := t.Update(ctx, k, Update{Add: map[string]int64{attr: delta}})
	if err != nil {
		return 0, err
	}
	return it.Int(attr), nil
}

// Expired reports whether item has expired at Unix second now. Backends use it on every read.
func Expired(item Item, now int64) bool {
	ttl, ok := item[TTL].(int64)
	return ok && ttl > 0 && ttl <= now
}

// EachPage runs q on t page after page to the end, calling fn with each page's items; an error
// from fn or from a Query stops it and is returned.
func EachPage(ctx context.Context, t Table, q Query, fn func([]Item) error) error {
	return eachPage(ctx, t, q, func(p Page) error { return fn(p.Items) })
}

// EachKeyPage is EachPage for the keys of q's items only (Query.KeysOnly).
func EachKeyPage(ctx context.Context, t Table, q Query, fn func([]Key) error) error {
	q.KeysOnly = true
	return eachPage(ctx, t, q, func(p Page) error { return fn(p.Keys) })
}

func eachPage(ctx context.Context, t Table, q Query, fn func(Page) error) error {
	for {
		p, err := t.Query(ctx, q)
		if err != nil {
			return err
		}
		if err := fn(p); err != nil {
			return err
		}
		if p.Next == "" {
			return nil
		}
		q.Cursor = p.Next
	}
}
