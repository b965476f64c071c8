package table

import (
	"bytes"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/rookery/rookery"
)

// This file holds the rules both backends share: what a valid key, item, update, query and
// transaction is, and what a condition and an update mean. Pebble evaluates conditions and updates
// with these functions; the DynamoDB backend validates with them and lets DynamoDB evaluate, and the
// conformance suite holds both to the same outcomes.

func itoa(n int) string { return strconv.Itoa(n) }

// CheckKey returns an Invalid error unless k has a non-empty, valid UTF-8 PK and SK within the
// length limits.
func CheckKey(op rookery.Op, k Key) error {
	if err := checkKeyPart(op, PK, k.PK, MaxPKBytes); err != nil {
		return err
	}
	return checkKeyPart(op, SK, k.SK, MaxSKBytes)
}

func checkKeyPart(op rookery.Op, name, v string, max int) error {
	switch {
	case v == "":
		return rookery.Errorf(op, rookery.Invalid, "key attribute %s is empty", name)
	case len(v) > max:
		return rookery.Errorf(op, rookery.Invalid, "key attribute %s is %d bytes; the limit is %d", name, len(v), max)
	case !utf8.ValidString(v):
		return rookery.Errorf(op, rookery.Invalid, "key attribute %s is not valid UTF-8", name)
	}
	return nil
}

// CheckItem validates item against schema and returns it with int values normalized to int64 (a
// copy if anything changed). It returns Invalid for a missing or malformed key, an unsupported
// value type or a malformed index key, and TooLarge for an item over MaxItemBytes.
func CheckItem(op rookery.Op, schema Schema, item Item) (Item, error) {
	pk, ok1 := item[PK].(string)
	sk, ok2 := item[SK].(string)
	if !ok1 || !ok2 {
		return nil, rookery.Errorf(op, rookery.Invalid, "item needs string attributes %s and %s", PK, SK)
	}
	if err := CheckKey(op, Key{pk, sk}); err != nil {
		return nil, err
	}
	var copied bool
	for name, v := range item {
		if name == "" || !utf8.ValidString(name) || len(name) > 255 {
			return nil, rookery.Errorf(op, rookery.Invalid, "attribute name %q is empty, too long or not UTF-8", name)
		}
		switch v := v.(type) {
		case string:
			if !utf8.ValidString(v) {
				return nil, rookery.Errorf(op, rookery.Invalid, "attribute %s is not valid UTF-8", name)
			}
		case int64, bool, []byte:
		case []string:
			for _, s := range v {
				if !utf8.ValidString(s) {
					return nil, rookery.Errorf(op, rookery.Invalid, "attribute %s holds a string that is not valid UTF-8", name)
				}
			}
		case int:
			if !copied {
				item, copied = clone(item), true
			}
			item[name] = int64(v)
		default:
			return nil, rookery.Errorf(op, rookery.Invalid, "attribute %s has unsupported type %T", name, v)
		}
	}
	if v, ok := item[TTL]; ok {
		if _, isNum := v.(int64); !isNum {
			return nil, rookery.Errorf(op, rookery.Invalid, "attribute %s must be a number (Unix seconds)", TTL)
		}
	}
	for _, ix := range schema.Indexes {
		ipk, hasPK := item[ix.PK]
		isk, hasSK := item[ix.SK]
		if !hasPK && !hasSK {
			continue
		}
		spk, ok1 := ipk.(string)
		ssk, ok2 := isk.(string)
		if hasPK && !ok1 || hasSK && !ok2 {
			return nil, rookery.Errorf(op, rookery.Invalid, "index %s key attributes must be strings", ix.Name)
		}
		if hasPK {
			if err := checkKeyPart(op, ix.PK, spk, MaxPKBytes); err != nil {
				return nil, err
			}
		}
		if hasSK {
			if err := checkKeyPart(op, ix.SK, ssk, MaxSKBytes); err != nil {
				return nil, err
			}
		}
	}
	if n := ItemSize(item); n > MaxItemBytes {
		return nil, rookery.Errorf(op, rookery.TooLarge, "item is %d bytes; the limit is %d", n, MaxItemBytes)
	}
	return item, nil
}

// ItemSize returns item's size as DynamoDB counts it against MaxItemBytes: the UTF-8 length of each
// attribute name plus its value's size (strings and binary by length, numbers by digits, booleans
// 1 byte, lists 3 bytes plus 1 byte and the size of each element).
func ItemSize(item Item) int {
	n := 0
	for name, v := range item {
		n += len(name)
		switch v := v.(type) {
		case string:
			n += len(v)
		case []byte:
			n += len(v)
		case int64:
			n += numberSize(v)
		case int:
			n += numberSize(int64(v))
		case bool:
			n++
		case []string:
			n += 3
			for _, s := range v {
				n += 1 + len(s)
			}
		}
	}
	return n
}

func numberSize(v int64) int {
	digits := len(strconv.FormatInt(v, 10))
	if v < 0 {
		digits--
	}
	return (digits+1)/2 + 1
}

func clone(item Item) Item {
	c := make(Item, len(item))
	for k, v := range item {
		c[k] = v
	}
	return c
}

// CheckConds returns Invalid unless every condition is well formed.
func CheckConds(op rookery.Op, conds []Cond) error {
	for _, c := range conds {
		if c.Attr == "" {
			return rookery.Errorf(op, rookery.Invalid, "condition on an empty attribute name")
		}
		switch c.Op {
		case OpExists, OpNotExists:
		case OpEq, OpNe:
			if !supported(c.Value) {
				return rookery.Errorf(op, rookery.Invalid, "condition value of unsupported type %T", c.Value)
			}
		case OpLt, OpLe, OpGt, OpGe:
			switch c.Value.(type) {
			case string, int64, int, []byte:
			default:
				return rookery.Errorf(op, rookery.Invalid, "ordering condition needs a string, number or binary value, not %T", c.Value)
			}
		default:
			return rookery.Errorf(op, rookery.Invalid, "unknown condition operator %d", c.Op)
		}
	}
	return nil
}

func supported(v any) bool {
	switch v.(type) {
	case string, int64, int, bool, []byte, []string:
		return true
	}
	return false
}

// Holds reports whether every condition holds against item, where item is nil if there is no
// item (or it has expired). This is the reference meaning of conditions.
func Holds(conds []Cond, item Item) bool {
	for _, c := range conds {
		if !holds(c, item) {
			return false
		}
	}
	return true
}

func holds(c Cond, item Item) bool {
	v, ok := item[c.Attr]
	switch c.Op {
	case OpExists:
		return ok
	case OpNotExists:
		return !ok
	}
	if !ok {
		return false
	}
	want := normalize(c.Value)
	if c.Op == OpEq {
		return equal(v, want)
	}
	if c.Op == OpNe {
		return !equal(v, want)
	}
	cmp, comparable := compare(v, want)
	if !comparable {
		return false
	}
	switch c.Op {
	case OpLt:
		return cmp < 0
	case OpLe:
		return cmp <= 0
	case OpGt:
		return cmp > 0
	case OpGe:
		return cmp >= 0
	}
	return false
}

func normalize(v any) any {
	if i, ok := v.(int); ok {
		return int64(i)
	}
	return v
}

func equal(a, b any) bool {
	switch a := a.(type) {
	case string:
		b, ok := b.(string)
		return ok && a == b
	case int64:
		b, ok := b.(int64)
		return ok && a == b
	case bool:
		b, ok := b.(bool)
		return ok && a == b
	case []byte:
		b, ok := b.([]byte)
		return ok && bytes.Equal(a, b)
	case []string:
		b, ok := b.([]string)
		return ok && slices.Equal(a, b)
	}
	return false
}

func compare(a, b any) (int, bool) {
	switch a := a.(type) {
	case string:
		if b, ok := b.(string); ok {
			return bytes.Compare([]byte(a), []byte(b)), true
		}
	case int64:
		if b, ok := b.(int64); ok {
			switch {
			case a < b:
				return -1, true
			case a > b:
				return 1, true
			}
			return 0, true
		}
	case []byte:
		if b, ok := b.([]byte); ok {
			return bytes.Compare(a, b), true
		}
	}
	return 0, false
}

// CheckUpdate returns Invalid unless u is well formed: it changes something, touches neither PK
// nor SK, names each attribute once, and sets only supported values.
func CheckUpdate(op rookery.Op, u Update) error {
	if len(u.Set)+len(u.Remove)+len(u.Add) == 0 {
		return rookery.Errorf(op, rookery.Invalid, "update changes nothing")
	}
	seen := make(map[string]bool, len(u.Set)+len(u.Remove)+len(u.Add))
	use := func(name string) error {
		if name == "" || name == PK || name == SK {
			return rookery.Errorf(op, rookery.Invalid, "update may not change attribute %q", name)
		}
		if seen[name] {
			return rookery.Errorf(op, rookery.Invalid, "update names attribute %s twice", name)
		}
		seen[name] = true
		return nil
	}
	for name, v := range u.Set {
		if err := use(name); err != nil {
			return err
		}
		if !supported(v) {
			return rookery.Errorf(op, rookery.Invalid, "attribute %s has unsupported type %T", name, v)
		}
	}
	for _, name := range u.Remove {
		if err := use(name); err != nil {
			return err
		}
	}
	for name := range u.Add {
		if err := use(name); err != nil {
			return err
		}
	}
	return nil
}

// ApplyUpdate returns the item that results from applying u to old (nil when there is none) with
// key k. It does not modify old. Adding to an attribute that is not a number is Invalid. This is
// the reference meaning of Update.
func ApplyUpdate(op rookery.Op, old Item, k Key, u Update) (Item, error) {
	next := make(Item, len(old)+len(u.Set)+len(u.Add)+2)
	for name, v := range old {
		next[name] = v
	}
	next[PK], next[SK] = k.PK, k.SK
	for name, v := range u.Set {
		next[name] = normalize(v)
	}
	for _, name := range u.Remove {
		delete(next, name)
	}
	for name, delta := range u.Add {
		cur, ok := next[name]
		if !ok {
			next[name] = delta
			continue
		}
		n, isNum := cur.(int64)
		if !isNum {
			return nil, rookery.Errorf(op, rookery.Invalid, "cannot add to attribute %s: it is not a number", name)
		}
		next[name] = n + delta
	}
	return next, nil
}

// CheckWrites validates a transaction's shape and each write's key, conditions and update, and
// returns the items of its puts normalized by CheckItem (in place in a copy of writes).
func CheckWrites(op rookery.Op, schema Schema, writes []Write) ([]Write, error) {
	if len(writes) == 0 {
		return nil, rookery.Errorf(op, rookery.Invalid, "transaction has no writes")
	}
	if len(writes) > MaxTransact {
		return nil, rookery.Errorf(op, rookery.Invalid, "transaction has %d writes; the limit is %d", len(writes), MaxTransact)
	}
	out := make([]Write, len(writes))
	seen := make(map[Key]bool, len(writes))
	for i, w := range writes {
		var err error
		switch w.Kind {
		case WritePut:
			w.Item, err = CheckItem(op, schema, w.Item)
		case WriteUpdate:
			if err = CheckKey(op, w.Key); err == nil {
				err = CheckUpdate(op, w.Update)
			}
		case WriteDelete, WriteCheck:
			err = CheckKey(op, w.Key)
			if err == nil && w.Kind == WriteCheck && len(w.Conds) == 0 {
				err = rookery.Errorf(op, rookery.Invalid, "a condition check needs a condition")
			}
		default:
			err = rookery.Errorf(op, rookery.Invalid, "write %d has unknown kind %d", i, w.Kind)
		}
		if err == nil {
			err = CheckConds(op, w.Conds)
		}
		if err == nil && w.Immutable && (w.Kind != WritePut && w.Kind != WriteDelete || len(w.Conds) > 0) {
			err = rookery.Errorf(op, rookery.Invalid, "write %d: only a put or a delete without conditions can be immutable", i)
		}
		if err == nil && w.Immutable && w.Kind == WriteDelete {
			if w.Item == nil || w.Item.Key() != w.Key {
				err = rookery.Errorf(op, rookery.Invalid, "write %d: an immutable delete needs the item it deletes", i)
			} else {
				w.Item, err = CheckItem(op, schema, w.Item)
			}
		}
		if err != nil {
			return nil, err
		}
		k := w.key()
		if seen[k] {
			return nil, rookery.Errorf(op, rookery.Invalid, "transaction writes key (%q, %q) twice", k.PK, k.SK)
		}
		seen[k] = true
		out[i] = w
	}
	return out, nil
}

// CheckBatchWrites validates writes for BatchWrite: puts and deletes without conditions, each key
// once, each write as CheckWrites checks it. It returns the writes as CheckWrites does.
func CheckBatchWrites(op rookery.Op, schema Schema, writes []Write) ([]Write, error) {
	seen := make(map[Key]bool, len(writes))
	for i, w := range writes {
		if w.Kind != WritePut && w.Kind != WriteDelete || len(w.Conds) > 0 {
			return nil, rookery.Errorf(op, rookery.Invalid, "write %d: a batch takes puts and deletes without conditions", i)
		}
		if k := w.key(); seen[k] {
			return nil, rookery.Errorf(op, rookery.Invalid, "batch writes key (%q, %q) twice", k.PK, k.SK)
		} else {
			seen[k] = true
		}
	}
	out := make([]Write, 0, len(writes))
	for chunk := range slices.Chunk(writes, MaxTransact) {
		checked, err := CheckWrites(op, schema, chunk)
		if err != nil {
			return nil, err
		}
		out = append(out, checked...)
	}
	return out, nil
}

// CheckQuery validates q against schema and returns the index it names (the zero Index for the
// base table) and its effective limit.
func CheckQuery(op rookery.Op, schema Schema, q Query) (Index, int, error) {
	var ix Index
	if q.Index != "" {
		var ok bool
		if ix, ok = schema.Index(q.Index); !ok {
			return Index{}, 0, rookery.Errorf(op, rookery.Invalid, "unknown index %q", q.Index)
		}
	}
	if err := checkKeyPart(op, "partition key", q.PK, MaxPKBytes); err != nil {
		return Index{}, 0, err
	}
	for _, a := range q.Attributes {
		if a == "" {
			return Index{}, 0, rookery.Errorf(op, rookery.Invalid, "a projected attribute has no name")
		}
	}
	limit := q.Limit
	switch {
	case limit == 0:
		limit = DefaultQueryLimit
	case limit < 0 || limit > MaxQueryLimit:
		return Index{}, 0, rookery.Errorf(op, rookery.Invalid, "query limit %d is outside 1..%d", limit, MaxQueryLimit)
	}
	switch q.SK.Op {
	case SKAll:
	case SKEq, SKLt, SKLe, SKGt, SKGe:
		if q.SK.Value == "" {
			return Index{}, 0, rookery.Errorf(op, rookery.Invalid, "sort-key condition needs a value")
		}
	case SKBeginsWith:
	case SKBetween:
		if q.SK.Value == "" || q.SK.Value > q.SK.Value2 {
			return Index{}, 0, rookery.Errorf(op, rookery.Invalid, "between needs non-empty bounds in order")
		}
	default:
		return Index{}, 0, rookery.Errorf(op, rookery.Invalid, "unknown sort-key operator %d", q.SK.Op)
	}
	return ix, limit, nil
}
