package tablestore_test

import (
	"testing"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/table/dynamo"
	"github.com/rookery/rookery/table/dynamo/dynamotest"
	"github.com/rookery/rookery/table/pebble"
	"github.com/rookery/rookery/timeline"
	"github.com/rookery/rookery/timeline/tablestore"
	"github.com/rookery/rookery/timeline/timelinetest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

var clock = rookery.SystemClock

func TestConformancePebble(t *testing.T) {
	timelinetest.Run(t, func(t testing.TB, cfg timelinetest.Config) timeline.Store {
		db, err := pebble.Open(pebble.Options{InMemory: true, Schema: app.Schema, Clock: cfg.Clock, CursorKey: []byte("k")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return tablestore.New(db, tablestore.Options{Limits: cfg.Limits, Clock: cfg.Clock})
	})
}

func TestConformanceDynamoDB(t *testing.T) {
	client := dynamotest.Client(t)
	timelinetest.Run(t, func(t testing.TB, cfg timelinetest.Config) timeline.Store {
		var db table.Table
		db, err := dynamo.New(client, dynamo.Options{Table: dynamotest.NewTable(t, client, app.Schema), Schema: app.Schema, Clock: cfg.Clock, CursorKey: []byte("k")})
		if err != nil {
			t.Fatal(err)
		}
		return tablestore.New(db, tablestore.Options{Limits: cfg.Limits, Clock: cfg.Clock})
	})
}
