package tablestore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/rookery/rookery/internal/testtable"
	"github.com/rookery/rookery/table"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table/dynamo/dynamotest"
	"github.com/rookery/rookery/timeline"
	"github.com/rookery/rookery/timeline/tablestore"
	"github.com/rookery/rookery/timeline/timelinetest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

var clock = rookery.SystemClock

// schema is what the store needs of a table: its index.
var schema = table.Schema{Indexes: []table.Index{tablestore.Index}}

// TestNeedsItsIndex: on a table without the store's index, New says so.
func TestNeedsItsIndex(t *testing.T) {
	_, err := tablestore.New(context.Background(), testtable.Pebble(t, table.Schema{}, clock), tablestore.Options{})
	if err == nil || !strings.Contains(err.Error(), tablestore.Index.Name) {
		t.Fatalf("New on a table without %s: %v", tablestore.Index.Name, err)
	}
}

func TestConformancePebble(t *testing.T) {
	timelinetest.Run(t, func(t testing.TB, cfg timelinetest.Config) timeline.Store {
		return testtable.Timelines(t, testtable.Pebble(t, schema, cfg.Clock), tablestore.Options{Limits: cfg.Limits, Clock: cfg.Clock})
	})
}

func TestConformanceDynamoDB(t *testing.T) {
	timelinetest.Run(t, func(t testing.TB, cfg timelinetest.Config) timeline.Store {
		return testtable.Timelines(t, testtable.Dynamo(t, schema, cfg.Clock), tablestore.Options{Limits: cfg.Limits, Clock: cfg.Clock})
	})
}
