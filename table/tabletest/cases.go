package tabletest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
)

var ctx = context.Background()

func (e *env) put(it table.Item, conds ...table.Cond) {
	e.t.Helper()
	if err := e.tab.Put(ctx, it, conds...); err != nil {
		e.t.Fatalf("Put(%v): %v", it.Key(), err)
	}
}

func (e *env) get(k table.Key) table.Item {
	e.t.Helper()
	it, err := e.tab.Get(ctx, k)
	if err != nil {
		e.t.Fatalf("Get(%v): %v", k, err)
	}
	return it
}

func (e *env) wantKind(what string, err error, k rookery.Kind) {
	e.t.Helper()
	if got := rookery.KindOf(err); got != k {
		e.t.Fatalf("%s: error %v has kind %v; want %v", what, err, got, k)
	}
}

func (e *env) wantAbsent(k table.Key) {
	e.t.Helper()
	_, err := e.tab.Get(ctx, k)
	e.wantKind(fmt.Sprintf("Get(%v)", k), err, rookery.NotFound)
}

func (e *env) query(q table.Query) table.Page {
	e.t.Helper()
	p, err := e.tab.Query(ctx, q)
	if err != nil {
		e.t.Fatalf("Query(index %q, partition %.40q, %+v): %v", q.Index, q.PK, q.SK, err)
	}
	return p
}

// all pages q to the end with page size limit and returns the items' sort keys (sk names the
// attribute to report).
func (e *env) all(q table.Query, limit int, sk string) []string {
	e.t.Helper()
	q.Limit = limit
	var out []string
	for pages := 0; ; pages++ {
		if pages > 10000 {
			e.t.Fatal("query does not end")
		}
		p := e.query(q)
		if len(p.Items) > limit {
			e.t.Fatalf("page has %d items; limit %d", len(p.Items), limit)
		}
		for _, it := range p.Items {
			out = append(out, it.String(sk))
		}
		if p.Next == "" {
			return out
		}
		if len(p.Items) == 0 {
			e.t.Fatal("an empty page has a next cursor")
		}
		q.Cursor = p.Next
	}
}

// eventually retries check for a few seconds: secondary indexes are only eventually consistent on
// some backends (see the table package doc).
func (e *env) eventually(what string, check func() error) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func key(pk, sk string) table.Key { return table.Key{PK: pk, SK: sk} }

func item(pk, sk string, attrs ...any) table.Item {
	it := table.Item{table.PK: pk, table.SK: sk}
	for i := 0; i+1 < len(attrs); i += 2 {
		it[attrs[i].(string)] = attrs[i+1]
	}
	return it
}

func testRoundTrip(e *env) {
	want := item("USER#a", "META",
		"s", "hello", "empty", "", "n", int64(-42), "max", int64(math.MaxInt64), "min", int64(math.MinInt64+1),
		"zero", int64(0), "t", true, "f", false, "b", []byte{0, 1, 2, 255}, "l", []string{"x", "", "y"},
		"nolist", []string{}, "uni", "héllo 🐦 ‮", "multi\nline", "a\tb")
	e.put(want)
	if diff := cmp.Diff(want, e.get(key("USER#a", "META"))); diff != "" {
		e.t.Fatalf("Get after Put differs (-want +got):\n%s", diff)
	}
	// An int is stored as int64.
	e.put(item("USER#a", "I", "n", 7))
	if got := e.get(key("USER#a", "I")).Int("n"); got != 7 {
		e.t.Fatalf("int attribute reads back as %d", got)
	}
	// Put replaces the whole item.
	e.put(item("USER#a", "META", "only", "this"))
	if diff := cmp.Diff(item("USER#a", "META", "only", "this"), e.get(key("USER#a", "META"))); diff != "" {
		e.t.Fatalf("Put did not replace the item (-want +got):\n%s", diff)
	}
}

func testMissing(e *env) {
	e.wantAbsent(key("nope", "nope"))
	if err := e.tab.Delete(ctx, key("nope", "nope")); err != nil {
		e.t.Fatalf("Delete of a missing item: %v", err)
	}
	e.put(item("p", "s"))
	if err := e.tab.Delete(ctx, key("p", "s")); err != nil {
		e.t.Fatal(err)
	}
	e.wantAbsent(key("p", "s"))
	p := e.query(table.Query{PK: "p"})
	if len(p.Items) != 0 || p.Next != "" {
		e.t.Fatalf("query of an empty partition = %+v", p)
	}
}

func testInvalid(e *env) {
	cases := []struct {
		name string
		err  error
	}{
		{"put without SK", e.tab.Put(ctx, table.Item{table.PK: "p"})},
		{"put with empty PK", e.tab.Put(ctx, item("", "s"))},
		{"put with a float", e.tab.Put(ctx, item("p", "s", "f", 1.5))},
		{"put with a map", e.tab.Put(ctx, item("p", "s", "m", map[string]any{}))},
		{"put with invalid UTF-8", e.tab.Put(ctx, item("p", "s", "x", "\xff"))},
		{"put with a non-string index key", e.tab.Put(ctx, item("p", "s", "GSI1PK", int64(1), "GSI1SK", "a"))},
		{"put with an empty index key", e.tab.Put(ctx, item("p", "s", "GSI1PK", "", "GSI1SK", "a"))},
		{"put with a string TTL", e.tab.Put(ctx, item("p", "s", table.TTL, "soon"))},
		{"delete with empty SK", e.tab.Delete(ctx, key("p", ""))},
	}
	_, err := e.tab.Get(ctx, key("", "s"))
	cases = append(cases, struct {
		name string
		err  error
	}{"get with empty PK", err})
	_, err = e.tab.Update(ctx, key("p", "s"), table.Update{Set: map[string]any{table.SK: "x"}})
	cases = append(cases, struct {
		name string
		err  error
	}{"update of SK", err})
	_, err = e.tab.Update(ctx, key("p", "s"), table.Update{})
	cases = append(cases, struct {
		name string
		err  error
	}{"empty update", err})
	_, err = e.tab.Query(ctx, table.Query{Index: "NOPE", PK: "p"})
	cases = append(cases, struct {
		name string
		err  error
	}{"query of an unknown index", err})
	_, err = e.tab.Query(ctx, table.Query{PK: "p", Limit: table.MaxQueryLimit + 1})
	cases = append(cases, struct {
		name string
		err  error
	}{"query over the limit", err})
	_, err = e.tab.Query(ctx, table.Query{PK: "p", SK: table.SKCond{Op: table.SKBetween, Value: "b", Value2: "a"}})
	cases = append(cases, struct {
		name string
		err  error
	}{"between with reversed bounds", err})
	for _, c := range cases {
		e.wantKind(c.name, c.err, rookery.Invalid)
	}
	// Nothing was written by any of them.
	if p := e.query(table.Query{PK: "p"}); len(p.Items) != 0 {
		e.t.Fatalf("invalid writes wrote %v", p.Items)
	}
}

func testKeyLimits(e *env) {
	pk, sk := strings.Repeat("p", table.MaxPKBytes), strings.Repeat("s", table.MaxSKBytes)
	e.put(item(pk, sk, "v", "ok"))
	if got := e.get(key(pk, sk)).String("v"); got != "ok" {
		e.t.Fatalf("item with maximal keys reads %q", got)
	}
	if p := e.query(table.Query{PK: pk}); len(p.Items) != 1 {
		e.t.Fatalf("query of a maximal partition key found %d items", len(p.Items))
	}
	// Multi-byte characters count in bytes.
	e.wantKind("PK one byte too long", e.tab.Put(ctx, item(pk+"p", "s")), rookery.Invalid)
	e.wantKind("SK one byte too long", e.tab.Put(ctx, item("p", sk+"s")), rookery.Invalid)
	e.wantKind("SK of multi-byte characters too long", e.tab.Put(ctx, item("p", strings.Repeat("é", table.MaxSKBytes/2+1))), rookery.Invalid)
	_, err := e.tab.Get(ctx, key("p", sk+"s"))
	e.wantKind("Get with SK too long", err, rookery.Invalid)
}

func testUnicodeKeys(e *env) {
	// '#' is the key schema's separator; the others are characters users put in tags and names.
	sks := []string{"a#b", "a#", "#", "a", "a b", "é", "e", "🐦", "日本", "A", "a|b", "a\x01b", "a~", "ÿ", "a#b#c"}
	for _, sk := range sks {
		e.put(item("TAG#日本語#🐦", sk, "sk", sk, "GSI1PK", "IX#🐦", "GSI1SK", sk))
	}
	want := slices.Clone(sks)
	slices.Sort(want) // Go compares strings by bytes, as DynamoDB compares UTF-8 keys.
	if diff := cmp.Diff(want, e.all(table.Query{PK: "TAG#日本語#🐦"}, 4, "sk")); diff != "" {
		e.t.Fatalf("ascending order differs from byte order (-want +got):\n%s", diff)
	}
	e.eventually("index order", func() error {
		if diff := cmp.Diff(want, e.all(table.Query{Index: "GSI1", PK: "IX#🐦"}, 5, "sk")); diff != "" {
			return fmt.Errorf("index order differs (-want +got):\n%s", diff)
		}
		return nil
	})
	got := e.all(table.Query{PK: "TAG#日本語#🐦", SK: table.SKCond{Op: table.SKBeginsWith, Value: "a#"}}, 100, "sk")
	if diff := cmp.Diff([]string{"a#", "a#b", "a#b#c"}, got); diff != "" {
		e.t.Fatalf("begins_with a# (-want +got):\n%s", diff)
	}
	for _, sk := range sks {
		if e.get(key("TAG#日本語#🐦", sk)).String("sk") != sk {
			e.t.Fatalf("Get(%q) returned another item", sk)
		}
	}
}

func testItemTooLarge(e *env) {
	big := strings.Repeat("x", table.MaxItemBytes)
	e.wantKind("Put", e.tab.Put(ctx, item("p", "s", "body", big)), rookery.TooLarge)
	_, err := e.tab.Update(ctx, key("p", "s"), table.Update{Set: map[string]any{"body": big}})
	e.wantKind("Update", err, rookery.TooLarge)
	err = e.tab.TransactWrite(ctx, []table.Write{table.PutWrite(item("p", "t")), table.PutWrite(item("p", "s", "body", big))})
	e.wantKind("TransactWrite", err, rookery.TooLarge)
	// Growing an item past the limit by update is too large too.
	half := strings.Repeat("y", table.MaxItemBytes/2+10)
	e.put(item("p", "g", "a", half))
	_, err = e.tab.Update(ctx, key("p", "g"), table.Update{Set: map[string]any{"b": half}})
	e.wantKind("Update growing past the limit", err, rookery.TooLarge)
	// Just under the limit is fine.
	e.put(item("p", "ok", "body", strings.Repeat("z", table.MaxItemBytes-1024)))
	if p := e.query(table.Query{PK: "p"}); len(p.Items) != 2 {
		e.t.Fatalf("after the too-large writes the partition has %d items; want 2", len(p.Items))
	}
}

func testConditions(e *env) {
	e.put(item("c", "x", "s", "m", "n", int64(10), "b", true))
	k := key("c", "x")
	cases := []struct {
		cond table.Cond
		want bool
	}{
		{table.Exists(table.PK), true},
		{table.Exists("s"), true},
		{table.Exists("missing"), false},
		{table.NotExists("missing"), true},
		{table.NotExists("s"), false},
		{table.Compare("s", table.OpEq, "m"), true},
		{table.Compare("s", table.OpEq, "n"), false},
		{table.Compare("s", table.OpNe, "n"), true},
		{table.Compare("s", table.OpLt, "n"), true},
		{table.Compare("s", table.OpLt, "m"), false},
		{table.Compare("s", table.OpLe, "m"), true},
		{table.Compare("s", table.OpGt, "l"), true},
		{table.Compare("s", table.OpGe, "z"), false},
		{table.Compare("n", table.OpEq, int64(10)), true},
		{table.Compare("n", table.OpEq, 10), true},
		{table.Compare("n", table.OpLt, int64(11)), true},
		{table.Compare("n", table.OpGt, int64(10)), false},
		{table.Compare("n", table.OpGe, int64(-5)), true},
		{table.Compare("b", table.OpEq, true), true},
		{table.Compare("n", table.OpEq, "10"), false},      // another type never compares equal
		{table.Compare("n", table.OpLt, "zz"), false},      // nor orders
		{table.Compare("missing", table.OpLt, "z"), false}, // absent attributes compare false
		{table.Compare("missing", table.OpNe, "z"), false},
	}
	for i, c := range cases {
		_, err := e.tab.Update(ctx, k, table.Update{Add: map[string]int64{"hits": 1}}, c.cond)
		if c.want && err != nil {
			e.t.Fatalf("case %d (%+v): want success, got %v", i, c.cond, err)
		}
		if !c.want {
			e.wantKind(fmt.Sprintf("case %d (%+v)", i, c.cond), err, rookery.Conflict)
		}
	}
	want := int64(0)
	for _, c := range cases {
		if c.want {
			want++
		}
	}
	if got := e.get(k).Int("hits"); got != want {
		e.t.Fatalf("hits = %d; want %d (failed conditions must change nothing)", got, want)
	}
	// Several conditions must all hold.
	_, err := e.tab.Update(ctx, k, table.Update{Set: map[string]any{"s": "q"}}, table.Exists("s"), table.Exists("missing"))
	e.wantKind("two conditions, one false", err, rookery.Conflict)
	// Conditions on an absent item.
	e.wantKind("Put if exists on absent", e.tab.Put(ctx, item("c", "new"), table.Exists(table.PK)), rookery.Conflict)
	e.wantAbsent(key("c", "new"))
	e.wantKind("Delete if n=11", e.tab.Delete(ctx, k, table.Compare("n", table.OpEq, int64(11))), rookery.Conflict)
	e.get(k)
	if err := e.tab.Delete(ctx, k, table.Compare("n", table.OpEq, int64(10))); err != nil {
		e.t.Fatal(err)
	}
	e.wantAbsent(k)
}

func testConditionalPut(e *env) {
	like := item("POST#1", "LIKE#bob", "at", int64(1))
	e.put(like, table.NotExists(table.PK))
	err := e.tab.Put(ctx, item("POST#1", "LIKE#bob", "at", int64(2)), table.NotExists(table.PK))
	e.wantKind("repeated conditional put", err, rookery.Conflict)
	if got := e.get(key("POST#1", "LIKE#bob")).Int("at"); got != 1 {
		e.t.Fatalf("the repeat changed the item: at = %d", got)
	}
}

func testUpdate(e *env) {
	k := key("u", "1")
	it, err := e.tab.Update(ctx, k, table.Update{Set: map[string]any{"name": "a", "tags": []string{"x"}}, Add: map[string]int64{"n": 5}})
	if err != nil {
		e.t.Fatal(err)
	}
	want := item("u", "1", "name", "a", "tags", []string{"x"}, "n", int64(5))
	if diff := cmp.Diff(want, it); diff != "" {
		e.t.Fatalf("Update creating the item returned (-want +got):\n%s", diff)
	}
	it, err = e.tab.Update(ctx, k, table.Update{Remove: []string{"tags"}, Add: map[string]int64{"n": -7, "m": 1}, Set: map[string]any{"flag": true}})
	if err != nil {
		e.t.Fatal(err)
	}
	want = item("u", "1", "name", "a", "n", int64(-2), "m", int64(1), "flag", true)
	if diff := cmp.Diff(want, it); diff != "" {
		e.t.Fatalf("Update returned (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, e.get(k)); diff != "" {
		e.t.Fatalf("Get after Update (-want +got):\n%s", diff)
	}
	_, err = e.tab.Update(ctx, k, table.Update{Add: map[string]int64{"name": 1}})
	e.wantKind("add to a string", err, rookery.Invalid)
	_, err = e.tab.Update(ctx, k, table.Update{Set: map[string]any{"x": 1}, Remove: []string{"x"}})
	e.wantKind("set and remove one attribute", err, rookery.Invalid)
	n, err := table.Add(ctx, e.tab, key("u", "counter"), "count", 3)
	if err != nil || n != 3 {
		e.t.Fatalf("Add = %d, %v; want 3", n, err)
	}
	// Removing an attribute that is absent is fine.
	if _, err := e.tab.Update(ctx, k, table.Update{Remove: []string{"nope"}}); err != nil {
		e.t.Fatal(err)
	}
}

func testVersionCheck(e *env) {
	k := key("streak", "alice")
	// Version 0 means "not written yet".
	if _, err := e.tab.Update(ctx, k, table.Update{Set: map[string]any{"v": int64(1), "days": int64(1)}}, table.VersionIs("v", 0)); err != nil {
		e.t.Fatal(err)
	}
	_, err := e.tab.Update(ctx, k, table.Update{Set: map[string]any{"v": int64(1), "days": int64(9)}}, table.VersionIs("v", 0))
	e.wantKind("second create", err, rookery.Conflict)
	if _, err := e.tab.Update(ctx, k, table.Update{Set: map[string]any{"v": int64(2), "days": int64(2)}}, table.VersionIs("v", 1)); err != nil {
		e.t.Fatal(err)
	}
	_, err = e.tab.Update(ctx, k, table.Update{Set: map[string]any{"v": int64(2), "days": int64(9)}}, table.VersionIs("v", 1))
	e.wantKind("stale version", err, rookery.Conflict)
	if got := e.get(k).Int("days"); got != 2 {
		e.t.Fatalf("days = %d; want 2", got)
	}
}

func testConcurrentAdd(e *env) {
	const workers, each = 50, 20
	k := key("POST#hot", "COUNTS")
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := table.Add(ctx, e.tab, k, "likes", 1); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		e.t.Fatal(err)
	}
	if got := e.get(k).Int("likes"); got != workers*each {
		e.t.Fatalf("likes = %d; want %d", got, workers*each)
	}
}

func testBatchGet(e *env) {
	var keys []table.Key
	for i := range 100 {
		k := key(fmt.Sprintf("b%d", i%7), fmt.Sprintf("s%03d", i))
		keys = append(keys, k)
		if i%3 != 0 {
			e.put(item(k.PK, k.SK, "i", int64(i)))
		}
	}
	keys[99] = keys[1] // a repeated key
	got, err := e.tab.BatchGet(ctx, keys)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(got) != len(keys) {
		e.t.Fatalf("BatchGet returned %d items for %d keys", len(got), len(keys))
	}
	for i, it := range got {
		want := i%3 != 0
		if i == 99 {
			want = true
		}
		switch {
		case want && it == nil:
			e.t.Fatalf("key %d (%v) missing", i, keys[i])
		case !want && it != nil:
			e.t.Fatalf("key %d (%v) should be missing, got %v", i, keys[i], it)
		case want && it.Key() != keys[i]:
			e.t.Fatalf("position %d holds %v; want %v", i, it.Key(), keys[i])
		}
	}
	if got, err := e.tab.BatchGet(ctx, nil); err != nil || len(got) != 0 {
		e.t.Fatalf("BatchGet(nil) = %v, %v", got, err)
	}
	_, err = e.tab.BatchGet(ctx, append(keys, key("x", "y")))
	e.wantKind("101 keys", err, rookery.Invalid)
}

func testQuerySKConditions(e *env) {
	for _, sk := range []string{"a", "b", "ba", "bb", "c", "d"} {
		e.put(item("q", sk, "sk", sk))
		e.put(item("other", sk, "sk", sk)) // another partition must never leak in
	}
	cases := []struct {
		c    table.SKCond
		want []string
	}{
		{table.SKCond{}, []string{"a", "b", "ba", "bb", "c", "d"}},
		{table.SKCond{Op: table.SKEq, Value: "b"}, []string{"b"}},
		{table.SKCond{Op: table.SKEq, Value: "zz"}, nil},
		{table.SKCond{Op: table.SKBeginsWith, Value: "b"}, []string{"b", "ba", "bb"}},
		{table.SKCond{Op: table.SKBeginsWith, Value: "ba"}, []string{"ba"}},
		{table.SKCond{Op: table.SKBeginsWith, Value: ""}, []string{"a", "b", "ba", "bb", "c", "d"}},
		{table.SKCond{Op: table.SKBetween, Value: "b", Value2: "c"}, []string{"b", "ba", "bb", "c"}},
		{table.SKCond{Op: table.SKBetween, Value: "b", Value2: "b"}, []string{"b"}},
		{table.SKCond{Op: table.SKLt, Value: "b"}, []string{"a"}},
		{table.SKCond{Op: table.SKLe, Value: "b"}, []string{"a", "b"}},
		{table.SKCond{Op: table.SKGt, Value: "bb"}, []string{"c", "d"}},
		{table.SKCond{Op: table.SKGe, Value: "bb"}, []string{"bb", "c", "d"}},
		{table.SKCond{Op: table.SKGt, Value: "d"}, nil},
	}
	for _, c := range cases {
		for _, desc := range []bool{false, true} {
			want := slices.Clone(c.want)
			if desc {
				slices.Reverse(want)
			}
			got := e.all(table.Query{PK: "q", SK: c.c, Desc: desc}, 2, "sk")
			if diff := cmp.Diff(want, got, cmpEmpty); diff != "" {
				e.t.Errorf("%+v desc=%v (-want +got):\n%s", c.c, desc, diff)
			}
		}
	}
}

var cmpEmpty = cmp.Comparer(func(a, b []string) bool { return slices.Equal(a, b) })

func testQueryPaging(e *env) {
	var want []string
	for i := range 57 {
		sk := fmt.Sprintf("%04d", i)
		want = append(want, sk)
		e.put(item("page", sk, "sk", sk))
	}
	for _, limit := range []int{1, 7, 19, 57, 100} {
		if diff := cmp.Diff(want, e.all(table.Query{PK: "page"}, limit, "sk")); diff != "" {
			e.t.Fatalf("limit %d ascending (-want +got):\n%s", limit, diff)
		}
	}
	rev := slices.Clone(want)
	slices.Reverse(rev)
	if diff := cmp.Diff(rev, e.all(table.Query{PK: "page", Desc: true}, 10, "sk")); diff != "" {
		e.t.Fatalf("descending (-want +got):\n%s", diff)
	}
	// A page that ends exactly at the last item has no next cursor.
	p := e.query(table.Query{PK: "page", Limit: 57})
	if len(p.Items) != 57 || p.Next != "" {
		e.t.Fatalf("exact page: %d items, next %q", len(p.Items), p.Next)
	}
	// Limit 0 is the default.
	if p := e.query(table.Query{PK: "page"}); len(p.Items) != 57 {
		e.t.Fatalf("default limit returned %d", len(p.Items))
	}
	// A cursor combined with a sort-key condition keeps the condition.
	q := table.Query{PK: "page", SK: table.SKCond{Op: table.SKBetween, Value: "0010", Value2: "0020"}, Limit: 4}
	got := e.all(q, 4, "sk")
	if diff := cmp.Diff(want[10:21], got); diff != "" {
		e.t.Fatalf("between with paging (-want +got):\n%s", diff)
	}
}

func testIndexQuery(e *env) {
	// Posts by author through GSI1, newest first; an item without the index attributes is not in it.
	for i := range 12 {
		e.put(item(fmt.Sprintf("POST#%02d", i), "META", "GSI1PK", "USER#ann", "GSI1SK", fmt.Sprintf("2026-11-%02d#POST#%02d", i+1, i), "n", int64(i)))
	}
	e.put(item("POST#xx", "META", "n", int64(99))) // sparse: not indexed
	e.put(item("POST#yy", "META", "GSI1PK", "USER#bob", "GSI1SK", "2026-11-01#POST#yy"))
	e.eventually("author index", func() error {
		got := e.all(table.Query{Index: "GSI1", PK: "USER#ann", Desc: true}, 5, table.PK)
		if len(got) != 12 || got[0] != "POST#11" || got[11] != "POST#00" {
			return fmt.Errorf("index listing = %v", got)
		}
		return nil
	})
	// Items come back whole (projection of every attribute).
	p := e.query(table.Query{Index: "GSI1", PK: "USER#ann", Limit: 1})
	if len(p.Items) != 1 || p.Items[0].Int("n") != 0 || p.Items[0].String(table.SK) != "META" {
		e.t.Fatalf("index item = %v", p.Items)
	}
	// Sort-key conditions apply to the index sort key.
	got := e.all(table.Query{Index: "GSI1", PK: "USER#ann", SK: table.SKCond{Op: table.SKBeginsWith, Value: "2026-11-0"}}, 3, table.PK)
	if len(got) != 9 {
		e.t.Fatalf("begins_with on the index found %v", got)
	}
	// Moving an item to another index partition, removing it from the index, deleting it.
	if _, err := e.tab.Update(ctx, key("POST#00", "META"), table.Update{Set: map[string]any{"GSI1PK": "USER#bob"}}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.tab.Update(ctx, key("POST#01", "META"), table.Update{Remove: []string{"GSI1SK"}}); err != nil {
		e.t.Fatal(err)
	}
	if err := e.tab.Delete(ctx, key("POST#02", "META")); err != nil {
		e.t.Fatal(err)
	}
	e.eventually("index after changes", func() error {
		ann := e.all(table.Query{Index: "GSI1", PK: "USER#ann"}, 100, table.PK)
		bob := e.all(table.Query{Index: "GSI1", PK: "USER#bob"}, 100, table.PK)
		if len(ann) != 9 || slices.Contains(ann, "POST#00") || slices.Contains(ann, "POST#01") || slices.Contains(ann, "POST#02") {
			return fmt.Errorf("ann's index partition = %v", ann)
		}
		if !slices.Equal(bob, []string{"POST#00", "POST#yy"}) {
			return fmt.Errorf("bob's index partition = %v", bob)
		}
		return nil
	})
	// Equal index sort keys are all returned, across pages.
	for i := range 5 {
		e.put(item(fmt.Sprintf("T%d", i), "META", "GSI2PK", "TAG#go", "GSI2SK", "same"))
	}
	e.eventually("equal index sort keys", func() error {
		if got := e.all(table.Query{Index: "GSI2", PK: "TAG#go"}, 2, table.PK); len(got) != 5 {
			return fmt.Errorf("found %v", got)
		}
		return nil
	})
}

func testKeysOnly(e *env) {
	now := e.clock.Now().Unix()
	for i := range 9 {
		it := item("KO#a", fmt.Sprintf("%02d", i), "GSI1PK", "KOIX", "GSI1SK", fmt.Sprintf("t%02d", 8-i),
			"text", strings.Repeat("x", i), "n", int64(i), "tags", []string{"a", "b"}, "bin", []byte{1, 2}, "ok", true)
		if i == 4 {
			it[table.TTL] = now - 1 // expired: invisible either way
		}
		if i == 5 {
			it[table.TTL] = now + 3600
		}
		if i == 6 {
			it[table.SK], it["GSI1SK"] = "06\x00é", "t02\x00" // escaped bytes in the engine key
		}
		e.put(it)
	}
	// One more in the index, from another partition whose key has escaped bytes too.
	e.put(item("KO#\x00b", "x\x00y", "GSI1PK", "KOIX", "GSI1SK", "t\x00"))
	for _, q := range []table.Query{{PK: "KO#a"}, {PK: "KO#a", Desc: true}, {Index: "GSI1", PK: "KOIX"}, {Index: "GSI1", PK: "KOIX", Desc: true}} {
		e.eventually("keys-only query", func() error {
			var want, keys []table.Key
			for _, keysOnly := range []bool{false, true} {
				q := q
				q.KeysOnly, q.Limit = keysOnly, 3
				for {
					p := e.query(q)
					if keysOnly {
						if p.Items != nil {
							return fmt.Errorf("a keys-only page of %+v has items: %v", q, p.Items)
						}
						keys = append(keys, p.Keys...)
					} else {
						for _, it := range p.Items {
							want = append(want, it.Key())
						}
					}
					if p.Next == "" {
						break
					}
					q.Cursor = p.Next
				}
			}
			n := 8 // 9 in the index
			if q.Index != "" {
				n = 9
			}
			if len(want) != n {
				return fmt.Errorf("the full query of %+v found %d items, not %d", q, len(want), n)
			}
			if diff := cmp.Diff(want, keys); diff != "" {
				return fmt.Errorf("keys-only query of %+v (-want +got):\n%s", q, diff)
			}
			return nil
		})
	}
}

func testProjection(e *env) {
	now := e.clock.Now().Unix()
	for i := range 7 {
		it := item("PR#a", fmt.Sprintf("%02d", i), "GSI1PK", "PRIX", "GSI1SK", fmt.Sprintf("t%02d", 6-i),
			"text", strings.Repeat("x", 100+i), "n", int64(i), "tags", []string{"a", "b"}, "bin", []byte{1, 2}, "ok", true)
		switch i {
		case 2:
			it[table.TTL] = now - 1 // expired: invisible either way
		case 3:
			it[table.TTL] = now + 3600
		case 4:
			delete(it, "n") // a projected attribute the item lacks is left out
		}
		e.put(it)
	}
	project := func(it table.Item, attrs []string, index bool) table.Item {
		keep := append([]string{table.PK, table.SK}, attrs...)
		if index {
			keep = append(keep, "GSI1PK", "GSI1SK")
		}
		out := table.Item{}
		for _, a := range keep {
			if v, ok := it[a]; ok {
				out[a] = v
			}
		}
		return out
	}
	for _, attrs := range [][]string{{"n", "tags"}, {"bin", table.TTL, table.SK}, {"missing"}} {
		for _, q := range []table.Query{{PK: "PR#a"}, {PK: "PR#a", Desc: true}, {Index: "GSI1", PK: "PRIX"}, {Index: "GSI1", PK: "PRIX", Desc: true}} {
			e.eventually("projected query", func() error {
				var want, got []table.Item
				for _, projected := range []bool{false, true} {
					q := q
					q.Limit = 2
					if projected {
						q.Attributes = attrs
					}
					for {
						p := e.query(q)
						for _, it := range p.Items {
							if projected {
								got = append(got, it)
							} else {
								want = append(want, project(it, attrs, q.Index != ""))
							}
						}
						if p.Next == "" {
							break
						}
						q.Cursor = p.Next
					}
				}
				if len(want) != 6 {
					return fmt.Errorf("the full query of %+v found %d items, not 6", q, len(want))
				}
				if diff := cmp.Diff(want, got); diff != "" {
					return fmt.Errorf("query of %+v projected to %q (-want +got):\n%s", q, attrs, diff)
				}
				return nil
			})
		}
	}
	_, err := e.tab.Query(ctx, table.Query{PK: "PR#a", Attributes: []string{"n", ""}})
	e.wantKind("a projection with an empty name", err, rookery.Invalid)
}

func testLeanPartitions(e *env) {
	// Every item three times, alike but for its keys: in a partition of full copies (FULL), in one
	// kept as keys only (LEAN#a) and in one kept with attribute n alone (PROJ#a). Every kind of
	// query of each must answer as of FULL, before and after the items change, move, leave the
	// index and expire.
	now := e.clock.Now().Unix()
	sides := []string{"FULL", "LEAN#a", "PROJ#a"}
	both := func(sk string, attrs ...any) {
		for _, side := range sides {
			it := item(side+"#item", sk, attrs...)
			it["GSI1PK"] = side
			e.put(it)
		}
	}
	for i := range 8 {
		sk := fmt.Sprintf("%02d", i)
		// Index sort keys are distinct, not in the items' order: DynamoDB leaves the order of ties open.
		attrs := []any{"GSI1SK", fmt.Sprintf("t%02d", i*3%8), "text", strings.Repeat("y", 50*i), "n", int64(i), "tags", []string{"a"}, "bin", []byte{byte(i)}}
		switch i {
		case 2:
			attrs = append(attrs, table.TTL, now-1) // expired: in neither answer
		case 3:
			attrs = append(attrs, table.TTL, now+60) // expires below
		case 4:
			sk = "04\x00é" // escaped bytes in the engine key
		}
		both(sk, attrs...)
	}
	update := func(sk string, u table.Update) {
		for _, side := range sides {
			if _, err := e.tab.Update(ctx, key(side+"#item", sk), u); err != nil {
				e.t.Fatal(err)
			}
		}
	}
	// A lean side's answer, with its keys written as the full side's.
	asFull := func(side string, it table.Item) table.Item {
		out := maps.Clone(it)
		for _, a := range []string{table.PK, "GSI1PK"} {
			if s, ok := out[a].(string); ok {
				out[a] = strings.Replace(s, side, "FULL", 1)
			}
		}
		return out
	}
	check := func(stage string, n int) {
		for _, desc := range []bool{false, true} {
			// "uncovered" asks for an attribute the projected side's entries lack.
			for _, shape := range []string{"full", "projected", "uncovered", "keys"} {
				e.eventually("lean partitions, "+stage, func() error {
					answers := make([][]table.Item, len(sides))
					for i, side := range sides {
						q := table.Query{Index: "GSI1", PK: side, Desc: desc, Limit: 3}
						switch shape {
						case "projected":
							q.Attributes = []string{"n", table.TTL}
						case "uncovered":
							q.Attributes = []string{"n", "text"}
						case "keys":
							q.KeysOnly = true
						}
						for pages := 0; ; pages++ {
							if pages > 100 {
								return fmt.Errorf("the %s query of %s (desc %v) does not end", shape, side, desc)
							}
							p := e.query(q)
							for _, it := range p.Items {
								answers[i] = append(answers[i], asFull(side, it))
							}
							for _, k := range p.Keys {
								answers[i] = append(answers[i], asFull(side, item(k.PK, k.SK)))
							}
							if p.Next == "" {
								break
							}
							q.Cursor = p.Next
						}
					}
					if len(answers[0]) != n {
						return fmt.Errorf("the full partition's %s query (desc %v) has %d items, not %d", shape, desc, len(answers[0]), n)
					}
					for i := 1; i < len(sides); i++ {
						if diff := cmp.Diff(answers[0], answers[i]); diff != "" {
							return fmt.Errorf("%s query (desc %v) of the full partition (-) and %s (+):\n%s", shape, desc, sides[i], diff)
						}
					}
					return nil
				})
			}
		}
	}
	check("as written", 7)
	update("00", table.Update{Set: map[string]any{"text": "changed", "GSI1SK": "t09"}, Add: map[string]int64{"n": 10}})
	update("01", table.Update{Remove: []string{"GSI1SK"}}) // leaves the index
	update("05", table.Update{Set: map[string]any{table.TTL: now + 3600}})
	for _, lean := range []string{"LEAN", "PROJ"} {
		if _, err := e.tab.Update(ctx, key(lean+"#a#item", "06"), table.Update{Set: map[string]any{"GSI1PK": lean + "#b"}}); err != nil {
			e.t.Fatal(err)
		}
	}
	if _, err := e.tab.Update(ctx, key("FULL#item", "06"), table.Update{Set: map[string]any{"GSI1PK": "ELSEWHERE"}}); err != nil {
		e.t.Fatal(err)
	}
	for _, side := range sides {
		if err := e.tab.Delete(ctx, key(side+"#item", "07")); err != nil {
			e.t.Fatal(err)
		}
	}
	both("08", "GSI1SK", "t10", "text", "new")
	check("after updates, a move, a removal and a delete", 5)
	e.clock.Advance(61 * time.Second)
	check("after an expiry", 4)
	// The moved items are in their new lean partitions, whole.
	for _, pk := range []string{"LEAN#b", "PROJ#b"} {
		e.eventually("moved to another lean partition", func() error {
			p := e.query(table.Query{Index: "GSI1", PK: pk})
			if len(p.Items) != 1 || p.Items[0].String("text") != strings.Repeat("y", 300) || p.Items[0].String("GSI1PK") != pk {
				return fmt.Errorf("%s holds %v", pk, p.Items)
			}
			return nil
		})
	}
}

func testBadCursors(e *env) {
	for i := range 10 {
		e.put(item("cur", fmt.Sprintf("%02d", i)))
		e.put(item("cur2", fmt.Sprintf("%02d", i)))
	}
	p := e.query(table.Query{PK: "cur", Limit: 3})
	if p.Next == "" {
		e.t.Fatal("no cursor")
	}
	bad := map[string]table.Query{
		"garbage":           {PK: "cur", Cursor: "not a cursor!"},
		"empty payload":     {PK: "cur", Cursor: "AA"},
		"another partition": {PK: "cur2", Cursor: p.Next},
		"another direction": {PK: "cur", Desc: true, Cursor: p.Next},
		"another condition": {PK: "cur", SK: table.SKCond{Op: table.SKGe, Value: "0"}, Cursor: p.Next},
		"another index":     {PK: "cur", Index: "GSI1", Cursor: p.Next},
	}
	// Every single-character change is detected.
	alphabet := "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for i := range len(p.Next) {
		c := []byte(p.Next)
		c[i] = alphabet[(strings.IndexByte(alphabet, c[i])+1)%len(alphabet)]
		bad[fmt.Sprintf("changed at %d", i)] = table.Query{PK: "cur", Cursor: string(c)}
	}
	bad["truncated"] = table.Query{PK: "cur", Cursor: p.Next[:len(p.Next)-2]}
	for name, q := range bad {
		_, err := e.tab.Query(ctx, q)
		e.wantKind(name, err, rookery.Invalid)
	}
	// A different limit is the same listing: the cursor still works.
	if _, err := e.tab.Query(ctx, table.Query{PK: "cur", Limit: 5, Cursor: p.Next}); err != nil {
		e.t.Fatal(err)
	}
}

func testCursorConcurrentInserts(e *env) {
	const initial = 300
	existing := map[string]bool{}
	for i := range initial {
		sk := fmt.Sprintf("%06d", i*10)
		existing[sk] = true
		e.put(item("feed", sk, "sk", sk))
	}
	for _, desc := range []bool{false, true} {
		pageWhileInserting(e, desc, initial, existing)
	}
}

func pageWhileInserting(e *env, desc bool, initial int, existing map[string]bool) {
	{
		var inserted atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		defer wg.Wait()
		defer close(stop)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(1, uint64(len(existing))))
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				// New items land before, between and after the existing ones.
				sk := fmt.Sprintf("%06d~%d", r.IntN(initial*10+100), n)
				if err := e.tab.Put(ctx, item("feed", sk, "sk", sk)); err != nil {
					e.t.Errorf("concurrent insert: %v", err)
					return
				}
				inserted.Add(1)
			}
		}()
		seen := map[string]bool{}
		q := table.Query{PK: "feed", Desc: desc, Limit: 7}
		var last string
		for {
			p := e.query(q)
			for _, it := range p.Items {
				sk := it.String("sk")
				if seen[sk] {
					e.t.Fatalf("desc=%v: %s repeated", desc, sk)
				}
				if last != "" && (sk < last) != desc {
					e.t.Fatalf("desc=%v: %s after %s is out of order", desc, sk, last)
				}
				seen[sk], last = true, sk
			}
			if p.Next == "" {
				break
			}
			q.Cursor = p.Next
			// Every page is read after at least one more insert, so paging and inserting interleave
			// on every run, however fast the backend pages.
			waitForMore(e, &inserted)
		}
		for sk := range existing {
			if !seen[sk] {
				e.t.Fatalf("desc=%v: %s existed throughout but was skipped", desc, sk)
			}
		}
	}
}

// waitForMore waits until n has grown (up to 10 s, which fails the test).
func waitForMore(e *env, n *atomic.Int64) {
	e.t.Helper()
	before, deadline := n.Load(), time.Now().Add(10*time.Second)
	for n.Load() == before {
		if time.Now().After(deadline) {
			e.t.Fatal("the concurrent writer made no progress")
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func testTransactAtomic(e *env) {
	e.put(item("acct", "a", "bal", int64(10)))
	e.put(item("acct", "b", "bal", int64(0)))
	e.put(item("acct", "open"))
	ok := []table.Write{
		table.UpdateWrite(key("acct", "a"), table.Update{Add: map[string]int64{"bal": -4}}, table.Compare("bal", table.OpGe, int64(4))),
		table.UpdateWrite(key("acct", "b"), table.Update{Add: map[string]int64{"bal": 4}}),
		table.PutWrite(item("acct", "log#1", "amount", int64(4)), table.NotExists(table.PK)),
		table.CheckWrite(key("acct", "open"), table.Exists(table.PK)),
	}
	if err := e.tab.TransactWrite(ctx, ok); err != nil {
		e.t.Fatal(err)
	}
	// The same again fails on write 2 (the log item exists): nothing of it is applied.
	err := e.tab.TransactWrite(ctx, ok)
	e.wantKind("repeated transaction", err, rookery.Conflict)
	var ce *table.ConditionError
	if !errors.As(err, &ce) || ce.Index != 2 {
		e.t.Fatalf("error %v does not name write 2", err)
	}
	if a, b := e.get(key("acct", "a")).Int("bal"), e.get(key("acct", "b")).Int("bal"); a != 6 || b != 4 {
		e.t.Fatalf("balances %d, %d after a failed transaction; want 6, 4", a, b)
	}
	// A failing condition check cancels the writes before it.
	err = e.tab.TransactWrite(ctx, []table.Write{
		table.DeleteWrite(key("acct", "a")),
		table.PutWrite(item("acct", "c")),
		table.CheckWrite(key("acct", "zzz"), table.Exists(table.PK)),
	})
	e.wantKind("failed check", err, rookery.Conflict)
	if !errors.As(err, &ce) || ce.Index != 2 {
		e.t.Fatalf("error %v does not name write 2", err)
	}
	e.get(key("acct", "a"))
	e.wantAbsent(key("acct", "c"))
	// Deletes and puts together.
	if err := e.tab.TransactWrite(ctx, []table.Write{table.DeleteWrite(key("acct", "a")), table.PutWrite(item("acct", "c"))}); err != nil {
		e.t.Fatal(err)
	}
	e.wantAbsent(key("acct", "a"))
	e.get(key("acct", "c"))
}

func testTransactLimits(e *env) {
	var writes []table.Write
	for i := range table.MaxTransact {
		writes = append(writes, table.PutWrite(item("tx", fmt.Sprintf("%03d", i), "GSI1PK", "TX", "GSI1SK", fmt.Sprintf("%03d", i))))
	}
	if err := e.tab.TransactWrite(ctx, writes); err != nil {
		e.t.Fatal(err)
	}
	if got := e.all(table.Query{PK: "tx"}, 1000, table.SK); len(got) != table.MaxTransact {
		e.t.Fatalf("transaction of %d wrote %d", table.MaxTransact, len(got))
	}
	err := e.tab.TransactWrite(ctx, append(writes, table.PutWrite(item("tx", "extra"))))
	e.wantKind("101 writes", err, rookery.Invalid)
	err = e.tab.TransactWrite(ctx, []table.Write{table.PutWrite(item("tx", "d")), table.DeleteWrite(key("tx", "d"))})
	e.wantKind("one key twice", err, rookery.Invalid)
	e.wantKind("no writes", e.tab.TransactWrite(ctx, nil), rookery.Invalid)
	e.wantAbsent(key("tx", "extra"))
	e.wantAbsent(key("tx", "d"))
}

func testEachPage(e *env) {
	for i := range 25 {
		e.put(item("each", fmt.Sprintf("%02d", i)))
	}
	var got []string
	pages := 0
	err := table.EachPage(ctx, e.tab, table.Query{PK: "each", Limit: 10}, func(items []table.Item) error {
		pages++
		for _, it := range items {
			got = append(got, it.String(table.SK))
		}
		return nil
	})
	if err != nil || len(got) != 25 || got[0] != "00" || got[24] != "24" || pages < 3 {
		e.t.Fatalf("EachPage: %d items in %d pages (%v), %v", len(got), pages, got, err)
	}
	stop := errors.New("stop")
	pages = 0
	err = table.EachPage(ctx, e.tab, table.Query{PK: "each", Limit: 10}, func([]table.Item) error { pages++; return stop })
	if !errors.Is(err, stop) || pages != 1 {
		e.t.Fatalf("EachPage with an error from fn: %d pages, %v", pages, err)
	}
}

func testImmutablePuts(e *env) {
	ttl := e.clock.Now().Add(time.Hour).Unix()
	entry := func(i int) table.Write {
		return table.ImmutablePutWrite(item("imm", fmt.Sprintf("%02d", i), "GSI1PK", "IMM", "GSI1SK", fmt.Sprintf("%02d", i), table.TTL, ttl))
	}
	for range 3 { // a redelivered fan-out writes the same entries again
		if err := e.tab.TransactWrite(ctx, []table.Write{entry(1), entry(2), entry(3)}); err != nil {
			e.t.Fatal(err)
		}
	}
	if got := e.all(table.Query{Index: "GSI1", PK: "IMM"}, 10, table.SK); len(got) != 3 {
		e.t.Fatalf("index entries after writing 3 immutable items 3 times: %v", got)
	}
	if got := e.get(key("imm", "02")); got.String("GSI1SK") != "02" {
		e.t.Fatalf("immutable item = %v", got)
	}
	if err := e.tab.TransactWrite(ctx, []table.Write{table.DeleteWrite(key("imm", "02"))}); err != nil {
		e.t.Fatal(err)
	}
	if got := e.all(table.Query{Index: "GSI1", PK: "IMM"}, 10, table.SK); len(got) != 2 {
		e.t.Fatalf("index entries after a delete: %v", got)
	}
	// An immutable delete removes the item and its index entries; again, or of a missing item, it
	// changes nothing.
	for range 2 {
		if err := e.tab.TransactWrite(ctx, []table.Write{table.ImmutableDeleteWrite(entry(3).Item), table.ImmutableDeleteWrite(entry(5).Item)}); err != nil {
			e.t.Fatal(err)
		}
	}
	if got := e.all(table.Query{Index: "GSI1", PK: "IMM"}, 10, table.SK); len(got) != 1 || got[0] != "01" {
		e.t.Fatalf("index entries after an immutable delete: %v", got)
	}
	if _, err := e.tab.Get(ctx, key("imm", "03")); !rookery.IsKind(err, rookery.NotFound) {
		e.t.Fatalf("Get after an immutable delete = %v", err)
	}
	mismatched := table.ImmutableDeleteWrite(entry(1).Item)
	mismatched.Key = key("imm", "02")
	e.wantKind("an immutable delete of another key's item", e.tab.TransactWrite(ctx, []table.Write{mismatched}), rookery.Invalid)
	bad := entry(4)
	bad.Conds = []table.Cond{table.NotExists(table.PK)}
	e.wantKind("an immutable put with a condition", e.tab.TransactWrite(ctx, []table.Write{bad}), rookery.Invalid)
	upd := table.UpdateWrite(key("imm", "01"), table.Update{Set: map[string]any{"a": "b"}})
	upd.Immutable = true
	e.wantKind("an immutable update", e.tab.TransactWrite(ctx, []table.Write{upd}), rookery.Invalid)
}

func testTransactConcurrent(e *env) {
	// Each transaction moves one unit from x to y only if x has one; x+y stays 40.
	e.put(item("inv", "x", "n", int64(40)))
	e.put(item("inv", "y", "n", int64(0)))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				err := e.tab.TransactWrite(ctx, []table.Write{
					table.UpdateWrite(key("inv", "x"), table.Update{Add: map[string]int64{"n": -1}}, table.Compare("n", table.OpGt, int64(0))),
					table.UpdateWrite(key("inv", "y"), table.Update{Add: map[string]int64{"n": 1}}),
				})
				// DynamoDB cancels transactions that collide with each other (Conflict or Unavailable);
				// either way nothing is applied, which is what this test checks.
				if err != nil && !rookery.IsKind(err, rookery.Conflict) && !rookery.IsKind(err, rookery.Unavailable) {
					e.t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	x, y := e.get(key("inv", "x")).Int("n"), e.get(key("inv", "y")).Int("n")
	if x+y != 40 || x < 0 {
		e.t.Fatalf("x=%d y=%d: the invariant x+y=40, x>=0 broke", x, y)
	}
}

func testTTL(e *env) {
	now := e.clock.Now().Unix()
	e.put(item("ttl", "past", table.TTL, now-1, "GSI1PK", "TTLIX", "GSI1SK", "past"))
	e.put(item("ttl", "now", table.TTL, now))
	e.put(item("ttl", "future", table.TTL, now+60, "GSI1PK", "TTLIX", "GSI1SK", "future"))
	e.put(item("ttl", "never", "GSI1PK", "TTLIX", "GSI1SK", "never"))
	e.wantAbsent(key("ttl", "past"))
	e.wantAbsent(key("ttl", "now"))
	e.get(key("ttl", "future"))
	if got := e.all(table.Query{PK: "ttl"}, 1, table.SK); !slices.Equal(got, []string{"future", "never"}) {
		e.t.Fatalf("query sees %v", got)
	}
	e.eventually("index without expired items", func() error {
		if got := e.all(table.Query{Index: "GSI1", PK: "TTLIX"}, 1, table.SK); !slices.Equal(got, []string{"future", "never"}) {
			return fmt.Errorf("index query sees %v", got)
		}
		return nil
	})
	items, err := e.tab.BatchGet(ctx, []table.Key{key("ttl", "past"), key("ttl", "future")})
	if err != nil || items[0] != nil || items[1] == nil {
		e.t.Fatalf("BatchGet = %v, %v", items, err)
	}
	// Time passes: the future item expires with no write.
	e.clock.Advance(61 * time.Second)
	e.wantAbsent(key("ttl", "future"))
	if got := e.all(table.Query{PK: "ttl", Desc: true}, 10, table.SK); !slices.Equal(got, []string{"never"}) {
		e.t.Fatalf("query after expiry sees %v", got)
	}
	// An expired item is absent to conditions: a conditional create succeeds ...
	e.put(item("ttl", "past", "v", "new"), table.NotExists(table.PK))
	if got := e.get(key("ttl", "past")); got.String("v") != "new" || got[table.TTL] != nil {
		e.t.Fatalf("recreated item = %v", got)
	}
	// ... an update starts from nothing ...
	it, err := e.tab.Update(ctx, key("ttl", "future"), table.Update{Add: map[string]int64{"n": 1}})
	if err != nil {
		e.t.Fatal(err)
	}
	if diff := cmp.Diff(item("ttl", "future", "n", int64(1)), it); diff != "" {
		e.t.Fatalf("update of an expired item (-want +got):\n%s", diff)
	}
	// ... and an existence check fails.
	e.put(item("ttl", "gone", table.TTL, now))
	_, err = e.tab.Update(ctx, key("ttl", "gone"), table.Update{Set: map[string]any{"x": "y"}}, table.Exists(table.PK))
	e.wantKind("update if exists of an expired item", err, rookery.Conflict)
	// Extending a TTL keeps the item.
	e.put(item("ttl", "lease", table.TTL, e.clock.Now().Unix()+5))
	if _, err := e.tab.Update(ctx, key("ttl", "lease"), table.Update{Set: map[string]any{table.TTL: e.clock.Now().Unix() + 3600}}); err != nil {
		e.t.Fatal(err)
	}
	e.clock.Advance(10 * time.Second)
	e.get(key("ttl", "lease"))
}

func testPing(e *env) {
	if err := e.tab.Ping(ctx); err != nil {
		e.t.Fatal(err)
	}
}

func testBatchWrite(e *env) {
	// More writes than a transaction takes, and than many of DynamoDB's batches, each in GSI1.
	var writes []table.Write
	for i := range 130 {
		sk := fmt.Sprintf("%03d", i)
		writes = append(writes, table.PutWrite(item("bw", sk, "GSI1PK", "BW", "GSI1SK", sk, "n", int64(i))))
	}
	if err := e.tab.BatchWrite(ctx, writes); err != nil {
		e.t.Fatal(err)
	}
	if got := e.all(table.Query{PK: "bw"}, 1000, table.SK); len(got) != 130 {
		e.t.Fatalf("a batch of 130 puts wrote %d", len(got))
	}
	if n := e.get(key("bw", "129")).Int("n"); n != 129 {
		e.t.Fatalf("item 129 holds n=%d", n)
	}
	// Puts and deletes together: an overwrite moves the item's index entry, a delete of an absent
	// item succeeds.
	err := e.tab.BatchWrite(ctx, []table.Write{
		table.PutWrite(item("bw", "000", "GSI1PK", "BW2", "GSI1SK", "x")),
		table.DeleteWrite(key("bw", "001")),
		table.DeleteWrite(key("bw", "nothing")),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.wantAbsent(key("bw", "001"))
	e.eventually("the index after the batch", func() error {
		if got := e.all(table.Query{Index: "GSI1", PK: "BW"}, 1000, table.SK); len(got) != 128 || got[0] != "002" {
			return fmt.Errorf("GSI1 BW holds %d items from %v; want 128 from 002", len(got), got[:min(len(got), 1)])
		}
		if got := e.all(table.Query{Index: "GSI1", PK: "BW2"}, 1000, table.SK); !slices.Equal(got, []string{"000"}) {
			return fmt.Errorf("GSI1 BW2 holds %v; want [000]", got)
		}
		return nil
	})
	// Only puts and deletes without conditions, each key once, each write well formed.
	for _, c := range []struct {
		what   string
		writes []table.Write
	}{
		{"an update", []table.Write{table.UpdateWrite(key("bw", "x"), table.Update{Set: map[string]any{"a": "b"}})}},
		{"a condition check", []table.Write{table.CheckWrite(key("bw", "002"), table.Exists(table.PK))}},
		{"a put with a condition", []table.Write{table.PutWrite(item("bw", "x"), table.NotExists(table.PK))}},
		{"one key twice", []table.Write{table.PutWrite(item("bw", "x")), table.DeleteWrite(key("bw", "x"))}},
		{"a malformed put", []table.Write{table.PutWrite(item("bw", "y")), table.PutWrite(item("", "s"))}},
	} {
		e.wantKind(c.what, e.tab.BatchWrite(ctx, c.writes), rookery.Invalid)
	}
	e.wantAbsent(key("bw", "x"))
	e.wantAbsent(key("bw", "y"))
	if err := e.tab.BatchWrite(ctx, nil); err != nil {
		e.t.Fatalf("a batch of no writes: %v", err)
	}
}
