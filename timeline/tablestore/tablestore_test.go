package tablestore_test

import (
	"testing"

	"github.com/rookery/rookery/internal/testtable"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/table/dynamo/dynamotest"
	"github.com/rookery/rookery/timeline"
	"github.com/rookery/rookery/timeline/tablestore"
	"github.com/rookery/rookery/timeline/timelinetest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

var clock = rookery.SystemClock

func TestConformancePebble(t *testing.T) {
	timelinetest.Run(t, func(t testing.TB, cfg timelinetest.Config) timeline.Store {
		return tablestore.New(testtable.Pebble(t, app.Schema, cfg.Clock), tablestore.Options{Limits: cfg.Limits, Clock: cfg.Clock})
	})
}

func TestConformanceDynamoDB(t *testing.T) {
	timelinetest.Run(t, func(t testing.TB, cfg timelinetest.Config) timeline.Store {
		return tablestore.New(testtable.Dynamo(t, app.Schema, cfg.Clock), tablestore.Options{Limits: cfg.Limits, Clock: cfg.Clock})
	})
}
