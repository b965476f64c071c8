package dynamo_test

import (
	"context"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/table/dynamo"
	"github.com/rookery/rookery/table/dynamo/dynamotest"
	"github.com/rookery/rookery/table/tabletest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

func TestConformance(t *testing.T) {
	client := dynamotest.Client(t)
	tabletest.Run(t, func(t testing.TB, cfg tabletest.Config) table.Table {
		db, err := dynamo.New(client, dynamo.Options{
			Table:     dynamotest.NewTable(t, client, cfg.Schema),
			Schema:    cfg.Schema,
			Clock:     cfg.Clock,
			CursorKey: cfg.CursorKey,
		})
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
}

func TestMigrateIsSafeToRepeatAndAddsIndexes(t *testing.T) {
	ctx := context.Background()
	client := dynamotest.Client(t)
	one := table.Schema{Indexes: tabletest.Schema.Indexes[:1]}
	name := dynamotest.NewTable(t, client, one)
	var steps []string
	if err := dynamo.Migrate(ctx, client, name, tabletest.Schema, func(s string) { steps = append(steps, s) }); err != nil {
		t.Fatal(err)
	}
	if len(steps) < 2 || steps[0] != "adding index GSI2 to table "+name {
		t.Fatalf("steps = %q", steps)
	}
	steps = nil
	if err := dynamo.Migrate(ctx, client, name, tabletest.Schema, func(s string) { steps = append(steps, s) }); err != nil {
		t.Fatal(err)
	}
	if len(steps) != 1 {
		t.Fatalf("a second run did %q; want nothing but the final report", steps)
	}
	db, err := dynamo.New(client, dynamo.Options{Table: name, Schema: tabletest.Schema, Clock: tabletest.NewClock(ctxTime()), CursorKey: []byte("k")})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Put(ctx, table.Item{table.PK: "a", table.SK: "b", "GSI2PK": "x", "GSI2SK": "y"}); err != nil {
		t.Fatal(err)
	}
	p, err := db.Query(ctx, table.Query{Index: "GSI2", PK: "x"})
	if err != nil || len(p.Items) != 1 {
		t.Fatalf("query of the added index: %v, %v", p.Items, err)
	}
	// Capacity is recorded per operation.
	c := db.Consumed()
	if c["PutItem"].Calls != 1 || c["PutItem"].Write <= 0 || c["Query"].Read <= 0 {
		t.Fatalf("consumed capacity = %+v", c)
	}
}

func ctxTime() (t0 time.Time) { return time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC) }

// BenchmarkDynamoLocal measures the DynamoDB backend against DynamoDB Local, for reference only:
// DynamoDB Local is a Java emulator and says nothing of DynamoDB's own latency.
func BenchmarkDynamoLocal(b *testing.B) {
	client := dynamotest.Client(b)
	tabletest.Bench(b, func(t testing.TB, cfg tabletest.Config) table.Table {
		db, err := dynamo.New(client, dynamo.Options{Table: dynamotest.NewTable(t, client, cfg.Schema), Schema: cfg.Schema, Clock: cfg.Clock, CursorKey: cfg.CursorKey})
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
}

// A client with only an endpoint and no credentials anywhere works against DynamoDB Local.
func TestClientWithoutCredentials(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	client, err := dynamo.NewClient(context.Background(), dynamo.ClientOptions{Endpoint: dynamotest.Endpoint(t)})
	if err != nil {
		t.Fatal(err)
	}
	name := dynamotest.NewTable(t, client, tabletest.Schema)
	db, err := dynamo.New(client, dynamo.Options{Table: name, Clock: rookery.SystemClock, CursorKey: []byte("k")})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}
