// Package testtable opens the tables tests run on: an in-memory Pebble table, or a fresh table on
// the DynamoDB Local of the test run (table/dynamo/dynamotest: the package's TestMain must call
// dynamotest.Main). Each is closed or dropped when its test ends.
package testtable

import (
	"context"
	"os"
	"testing"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/table/dynamo"
	"github.com/rookery/rookery/table/dynamo/dynamotest"
	"github.com/rookery/rookery/table/pebble"
	"github.com/rookery/rookery/timeline/tablestore"
)

// cursorKey signs the test tables' cursors.
var cursorKey = []byte("test cursor key")

// Pebble opens an in-memory Pebble table of schema (none for the zero Schema) on clock; tune, if
// given, changes its options before it opens.
func Pebble(t testing.TB, schema table.Schema, clock rookery.Clock, tune ...func(*pebble.Options)) *pebble.DB {
	t.Helper()
	o := pebble.Options{InMemory: true, Schema: schema, Clock: clock, CursorKey: cursorKey}
	for _, f := range tune {
		f(&o)
	}
	db, err := pebble.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Dynamo opens a new table of schema on the test run's DynamoDB, on clock.
func Dynamo(t testing.TB, schema table.Schema, clock rookery.Clock) table.Table {
	t.Helper()
	client := dynamotest.Client(t)
	db, err := dynamo.New(client, dynamo.Options{Table: dynamotest.NewTable(t, client, schema), Schema: schema, Clock: clock, CursorKey: cursorKey})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// FromEnv opens the table ROOKERY_TEST_STORE names: pebble (the default) or dynamo (make test runs
// the HTTP scenario tests a second time so).
func FromEnv(t testing.TB, schema table.Schema, clock rookery.Clock) table.Table {
	if os.Getenv("ROOKERY_TEST_STORE") == "dynamo" {
		return Dynamo(t, schema, clock)
	}
	return Pebble(t, schema, clock)
}

// Timelines opens table-backed timelines on tab.
func Timelines(t testing.TB, tab table.Table, o tablestore.Options) *tablestore.Store {
	t.Helper()
	s, err := tablestore.New(context.Background(), tab, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
