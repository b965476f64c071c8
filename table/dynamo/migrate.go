package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
)

// MigrateOption adds to what Migrate creates.
type MigrateOption func(*migrateOptions)

type migrateOptions struct{ stream bool }

// WithStream makes Migrate enable the table's stream (new images), which the outbox relay over
// DynamoDB Streams reads (events/ddbrelay).
func WithStream() MigrateOption { return func(o *migrateOptions) { o.stream = true } }

// Migrate creates the table name with the key schema of package table (PK and SK, strings), every
// secondary index of schema (global, projecting all attributes), TTL on table.TTL and, WithStream,
// a stream of new images, or brings an existing table up to that: missing indexes are added one at
// a time, TTL and the stream are enabled (a stream is never disabled). It waits
// until the table and its indexes are active. It is safe to run again; it never removes anything.
// progress, if not nil, is told each step.
func Migrate(ctx context.Context, client *dynamodb.Client, name string, schema table.Schema, progress func(string), opts ...MigrateOption) error {
	const op rookery.Op = "dynamo.Migrate"
	var mo migrateOptions
	for _, o := range opts {
		o(&mo)
	}
	say := func(format string, args ...any) {
		if progress != nil {
			progress(fmt.Sprintf(format, args...))
		}
	}
	desc, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	var rnf *types.ResourceNotFoundException
	switch {
	case errors.As(err, &rnf):
		say("creating table %s with %d indexes", name, len(schema.Indexes))
		if err := createTable(ctx, client, name, schema, mo.stream); err != nil {
			return translate(op, err)
		}
	case err != nil:
		return translate(op, err)
	default:
		if err := checkKeySchema(name, desc.Table.KeySchema); err != nil {
			return rookery.E(op, rookery.Invalid, err.Error())
		}
		if ss := desc.Table.StreamSpecification; mo.stream && (ss == nil || !aws.ToBool(ss.StreamEnabled)) {
			say("enabling the stream (new images) of table %s", name)
			if _, err := client.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(name), StreamSpecification: streamSpec}); err != nil {
				return translate(op, err)
			}
			if err := waitActive(ctx, client, name); err != nil {
				return translate(op, err)
			}
		}
		have := map[string]bool{}
		for _, g := range desc.Table.GlobalSecondaryIndexes {
			have[aws.ToString(g.IndexName)] = true
		}
		for _, ix := range schema.Indexes {
			if have[ix.Name] {
				continue
			}
			say("adding index %s to table %s", ix.Name, name)
			_, err := client.UpdateTable(ctx, &dynamodb.UpdateTableInput{
				TableName:            aws.String(name),
				AttributeDefinitions: attrDefs(table.Schema{Indexes: []table.Index{ix}}),
				GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{
					Create: &types.CreateGlobalSecondaryIndexAction{
						IndexName:  aws.String(ix.Name),
						KeySchema:  keySchema(ix.PK, ix.SK),
						Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
					},
				}},
			})
			if err != nil {
				return translate(op, err)
			}
			if err := waitActive(ctx, client, name); err != nil {
				return translate(op, err)
			}
		}
	}
	if err := waitActive(ctx, client, name); err != nil {
		return translate(op, err)
	}
	ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	if err != nil {
		return translate(op, err)
	}
	if d := ttl.TimeToLiveDescription; d == nil || (d.TimeToLiveStatus != types.TimeToLiveStatusEnabled && d.TimeToLiveStatus != types.TimeToLiveStatusEnabling) {
		say("enabling TTL on attribute %s", table.TTL)
		_, err := client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName:               aws.String(name),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(table.TTL), Enabled: aws.Bool(true)},
		})
		if err != nil {
			return translate(op, err)
		}
	}
	say("table %s is ready", name)
	return nil
}

// streamSpec is the table's stream: new images, which the outbox relay over DynamoDB Streams reads
// (events/ddbrelay). A stream costs nothing on AWS until it is read. (DynamoDB Local slows down as
// its streams' records pile up, so tests that do not read one make their tables without.)
var streamSpec = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewImage}

func createTable(ctx context.Context, client *dynamodb.Client, name string, schema table.Schema, stream bool) error {
	in := &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: attrDefs(schema),
		KeySchema:            keySchema(table.PK, table.SK),
		BillingMode:          types.BillingModePayPerRequest,
	}
	if stream {
		in.StreamSpecification = streamSpec
	}
	for _, ix := range schema.Indexes {
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
			IndexName:  aws.String(ix.Name),
			KeySchema:  keySchema(ix.PK, ix.SK),
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		})
	}
	_, err := client.CreateTable(ctx, in)
	return err
}

func attrDefs(schema table.Schema) []types.AttributeDefinition {
	seen := map[string]bool{}
	var defs []types.AttributeDefinition
	add := func(names ...string) {
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				defs = append(defs, types.AttributeDefinition{AttributeName: aws.String(n), AttributeType: types.ScalarAttributeTypeS})
			}
		}
	}
	add(table.PK, table.SK)
	for _, ix := range schema.Indexes {
		add(ix.PK, ix.SK)
	}
	return defs
}

func keySchema(pk, sk string) []types.KeySchemaElement {
	return []types.KeySchemaElement{
		{AttributeName: aws.String(pk), KeyType: types.KeyTypeHash},
		{AttributeName: aws.String(sk), KeyType: types.KeyTypeRange},
	}
}

func checkKeySchema(name string, ks []types.KeySchemaElement) error {
	want := keySchema(table.PK, table.SK)
	if len(ks) != 2 || aws.ToString(ks[0].AttributeName) != table.PK || ks[0].KeyType != want[0].KeyType ||
		aws.ToString(ks[1].AttributeName) != table.SK || ks[1].KeyType != want[1].KeyType {
		return fmt.Errorf("table %s exists with another key schema; Rookery needs hash key %s and range key %s", name, table.PK, table.SK)
	}
	return nil
}

// waitActive waits until the table and all its indexes are ACTIVE.
func waitActive(ctx context.Context, client *dynamodb.Client, name string) error {
	for {
		out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err != nil {
			return err
		}
		ready := out.Table.TableStatus == types.TableStatusActive
		for _, g := range out.Table.GlobalSecondaryIndexes {
			ready = ready && g.IndexStatus == types.IndexStatusActive
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// DropTable deletes the table name; tests use it to clean up.
func DropTable(ctx context.Context, client *dynamodb.Client, name string) error {
	_, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	return translate("dynamo.DropTable", err)
}
