// Package dynamo is the AWS DynamoDB table backend: table.Table on one DynamoDB table (the
// single-table design of the seeds), for scale-out deployments. Tests run it against AWS DynamoDB
// Local (scripts/dynamodb-local.sh).
//
// Engine errors are translated where they happen: a failed condition is Conflict; throttling,
// transaction conflicts and transport failures are Unavailable once the SDK's own retries are spent;
// a cancelled transaction says which write's condition failed. Unprocessed keys of BatchGetItem are
// retried with exponential backoff and jitter until done or the context ends (seed 004 §2). The
// consumed capacity of every call is reported to Options.Capacity and totalled per operation.
//
// TTL: DynamoDB removes expired items by itself, up to days late, so every read here filters them
// out, and every conditional or updating write carries a guard that the item is not expired; when
// the guard fails the expired item is deleted and the write retried, so an expired item behaves as
// absent, as the table contract says.
package dynamo

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
)

// Options configure a DB.
type Options struct {
	// Table is the DynamoDB table's name. Required; create it with Migrate.
	Table string
	// Schema names the secondary indexes (Migrate creates them).
	Schema table.Schema
	// Clock decides TTL expiry. Required.
	Clock rookery.Clock
	// CursorKey signs query cursors. Required.
	CursorKey []byte
	// Capacity, if set, is told the capacity units each call consumed.
	Capacity func(op string, read, write float64)
}

// DB is a table.Table stored in DynamoDB.
type DB struct {
	client  *dynamodb.Client
	opts    Options
	cursors *table.Cursors

	mu       sync.Mutex
	consumed map[string]Capacity
}

// Capacity is the capacity consumed by one kind of operation since the DB was made.
type Capacity struct {
	Calls       int64
	Read, Write float64
}

var _ table.Table = (*DB)(nil)

// New returns a DB over client and opts.Table. It does not check that the table exists (Ping does).
func New(client *dynamodb.Client, opts Options) (*DB, error) {
	if opts.Table == "" || opts.Clock == nil || len(opts.CursorKey) == 0 {
		return nil, rookery.E(rookery.Op("dynamo.New"), rookery.Invalid, "a table name, a clock and a cursor key are required")
	}
	return &DB{client: client, opts: opts, cursors: table.NewCursors(opts.CursorKey), consumed: map[string]Capacity{}}, nil
}

// Consumed returns the capacity consumed so far, by operation ("GetItem", "Query", ...).
func (d *DB) Consumed() map[string]Capacity {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]Capacity, len(d.consumed))
	for k, v := range d.consumed {
		out[k] = v
	}
	return out
}

func (d *DB) record(op string, ccs ...types.ConsumedCapacity) {
	var r, w float64
	for _, cc := range ccs {
		r += aws.ToFloat64(cc.ReadCapacityUnits)
		w += aws.ToFloat64(cc.WriteCapacityUnits)
		if cc.ReadCapacityUnits == nil && cc.WriteCapacityUnits == nil {
			// DynamoDB reports only a total for some calls: attribute it by the call's kind.
			if isWrite(op) {
				w += aws.ToFloat64(cc.CapacityUnits)
			} else {
				r += aws.ToFloat64(cc.CapacityUnits)
			}
		}
	}
	d.mu.Lock()
	c := d.consumed[op]
	c.Calls++
	c.Read += r
	c.Write += w
	d.consumed[op] = c
	d.mu.Unlock()
	if d.opts.Capacity != nil {
		d.opts.Capacity(op, r, w)
	}
}

func isWrite(op string) bool {
	switch op {
	case "PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem":
		return true
	}
	return false
}

func (d *DB) now() int64 { return d.opts.Clock.Now().Unix() }

func (d *DB) tableName() *string { return aws.String(d.opts.Table) }

// translate turns an SDK error into a *rookery.Error of the right Kind.
func translate(op rookery.Op, err error) error {
	if err == nil {
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	var rnf *types.ResourceNotFoundException
	var apiErr smithy.APIError
	var already *rookery.Error
	switch {
	case errors.As(err, &already):
		return rookery.E(op, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return rookery.E(op, rookery.Unavailable, err)
	case errors.As(err, &ccf):
		return rookery.E(op, rookery.Conflict, "condition failed", err)
	case errors.As(err, &rnf):
		return rookery.E(op, rookery.Unavailable, "the DynamoDB table does not exist (run rookery migrate)", err)
	case errors.As(err, &apiErr):
		switch apiErr.ErrorCode() {
		case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
			"InternalServerError", "ServiceUnavailable", "TransactionConflictException",
			"TransactionInProgressException", "LimitExceededException":
			return rookery.E(op, rookery.Unavailable, "DynamoDB is busy; retry", err)
		}
		return rookery.E(op, rookery.Internal, err)
	}
	// Not an answer from DynamoDB at all: the connection failed.
	return rookery.E(op, rookery.Unavailable, "DynamoDB is unreachable", err)
}

// Ping implements table.Table: it describes the table.
func (d *DB) Ping(ctx context.Context) error {
	_, err := d.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: d.tableName()})
	return translate("dynamo.Ping", err)
}

// Close implements table.Table; the SDK client holds nothing that needs closing.
func (d *DB) Close() error { return nil }

// Get implements table.Table.
func (d *DB) Get(ctx context.Context, k table.Key) (table.Item, error) {
	const op rookery.Op = "dynamo.Get"
	if err := table.CheckKey(op, k); err != nil {
		return nil, err
	}
	it, err := d.getRaw(ctx, op, k)
	if err != nil {
		return nil, err
	}
	if it == nil || table.Expired(it, d.now()) {
		return nil, rookery.E(op, rookery.NotFound, "item not found")
	}
	return it, nil
}

// getRaw returns the stored item, expired or not, or nil.
func (d *DB) getRaw(ctx context.Context, op rookery.Op, k table.Key) (table.Item, error) {
	out, err := d.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:              d.tableName(),
		Key:                    keyAV(k),
		ConsistentRead:         aws.Bool(true),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	if err != nil {
		return nil, translate(op, err)
	}
	if out.ConsumedCapacity != nil {
		d.record("GetItem", *out.ConsumedCapacity)
	}
	if out.Item == nil {
		return nil, nil
	}
	it, err := fromAVMap(out.Item)
	if err != nil {
		return nil, rookery.E(op, rookery.Internal, err)
	}
	return it, nil
}

// BatchGet implements table.Table.
func (d *DB) BatchGet(ctx context.Context, keys []table.Key) ([]table.Item, error) {
	const op rookery.Op = "dynamo.BatchGet"
	if len(keys) > table.MaxBatchGet {
		return nil, rookery.Errorf(op, rookery.Invalid, "%d keys; the limit is %d", len(keys), table.MaxBatchGet)
	}
	// BatchGetItem rejects repeated keys: ask for each once.
	want := make(map[table.Key]bool, len(keys))
	var request []map[string]types.AttributeValue
	for _, k := range keys {
		if err := table.CheckKey(op, k); err != nil {
			return nil, err
		}
		if !want[k] {
			want[k] = true
			request = append(request, keyAV(k))
		}
	}
	found := make(map[table.Key]table.Item, len(request))
	now := d.now()
	for attempt := 0; len(request) > 0; attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, attempt); err != nil {
				return nil, rookery.E(op, rookery.Unavailable, "unprocessed keys remain", err)
			}
		}
		out, err := d.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
			RequestItems:           map[string]types.KeysAndAttributes{d.opts.Table: {Keys: request, ConsistentRead: aws.Bool(true)}},
			ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		})
		if err != nil {
			return nil, translate(op, err)
		}
		d.record("BatchGetItem", out.ConsumedCapacity...)
		for _, m := range out.Responses[d.opts.Table] {
			it, err := fromAVMap(m)
			if err != nil {
				return nil, rookery.E(op, rookery.Internal, err)
			}
			if !table.Expired(it, now) {
				found[it.Key()] = it
			}
		}
		request = out.UnprocessedKeys[d.opts.Table].Keys
	}
	items := make([]table.Item, len(keys))
	for i, k := range keys {
		items[i] = found[k]
	}
	return items, nil
}

// maxBatchWrite is the most writes one BatchWriteItem takes.
const maxBatchWrite = 25

// BatchWrite implements table.Table: BatchWriteItem, maxBatchWrite writes a call, sending what
// DynamoDB left unprocessed again after a backoff.
func (d *DB) BatchWrite(ctx context.Context, writes []table.Write) error {
	const op rookery.Op = "dynamo.BatchWrite"
	writes, err := table.CheckBatchWrites(op, d.opts.Schema, writes)
	if err != nil {
		return err
	}
	for chunk := range slices.Chunk(writes, maxBatchWrite) {
		request := make([]types.WriteRequest, len(chunk))
		for i, w := range chunk {
			if w.Kind == table.WritePut {
				request[i].PutRequest = &types.PutRequest{Item: toAVMap(w.Item)}
			} else {
				request[i].DeleteRequest = &types.DeleteRequest{Key: keyAV(w.Key)}
			}
		}
		for attempt := 0; len(request) > 0; attempt++ {
			if attempt > 0 {
				if err := backoff(ctx, attempt); err != nil {
					return rookery.E(op, rookery.Unavailable, "unprocessed writes remain", err)
				}
			}
			out, err := d.client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
				RequestItems:           map[string][]types.WriteRequest{d.opts.Table: request},
				ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
			})
			if err != nil {
				return translate(op, err)
			}
			d.record("BatchWriteItem", out.ConsumedCapacity...)
			request = out.UnprocessedItems[d.opts.Table]
		}
	}
	return nil
}

// backoff sleeps before retry attempt n (1, 2, ...): exponential from 25 ms, capped at 2 s, with full
// jitter. It returns ctx's error if ctx ends first.
func backoff(ctx context.Context, n int) error {
	ceiling := 25 * time.Millisecond << min(n-1, 7)
	ceiling = min(ceiling, 2*time.Second)
	t := time.NewTimer(time.Duration(rand.Int64N(int64(ceiling)) + 1))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Put implements table.Table.
func (d *DB) Put(ctx context.Context, item table.Item, conds ...table.Cond) error {
	const op rookery.Op = "dynamo.Put"
	item, err := table.CheckItem(op, d.opts.Schema, item)
	if err != nil {
		return err
	}
	if err := table.CheckConds(op, conds); err != nil {
		return err
	}
	return d.retryExpired(ctx, op, []table.Key{item.Key()}, func() (int, error) {
		e := newExpr()
		in := &dynamodb.PutItemInput{
			TableName:              d.tableName(),
			Item:                   toAVMap(item),
			ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		}
		if len(conds) > 0 {
			in.ConditionExpression = aws.String(e.condition(conds, true, d.now()))
		}
		in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.namesOrNil(), e.valuesOrNil()
		out, err := d.client.PutItem(ctx, in)
		if err != nil {
			return 0, err
		}
		d.record("PutItem", deref(out.ConsumedCapacity)...)
		return 0, nil
	})
}

// Delete implements table.Table.
func (d *DB) Delete(ctx context.Context, k table.Key, conds ...table.Cond) error {
	const op rookery.Op = "dynamo.Delete"
	if err := table.CheckKey(op, k); err != nil {
		return err
	}
	if err := table.CheckConds(op, conds); err != nil {
		return err
	}
	return d.retryExpired(ctx, op, []table.Key{k}, func() (int, error) {
		e := newExpr()
		in := &dynamodb.DeleteItemInput{
			TableName:              d.tableName(),
			Key:                    keyAV(k),
			ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		}
		if len(conds) > 0 {
			in.ConditionExpression = aws.String(e.condition(conds, true, d.now()))
		}
		in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.namesOrNil(), e.valuesOrNil()
		out, err := d.client.DeleteItem(ctx, in)
		if err != nil {
			return 0, err
		}
		d.record("DeleteItem", deref(out.ConsumedCapacity)...)
		return 0, nil
	})
}

// Update implements table.Table.
func (d *DB) Update(ctx context.Context, k table.Key, u table.Update, conds ...table.Cond) (table.Item, error) {
	const op rookery.Op = "dynamo.Update"
	if err := table.CheckKey(op, k); err != nil {
		return nil, err
	}
	if err := table.CheckUpdate(op, u); err != nil {
		return nil, err
	}
	if err := table.CheckConds(op, conds); err != nil {
		return nil, err
	}
	var after table.Item
	err := d.retryExpired(ctx, op, []table.Key{k}, func() (int, error) {
		e := newExpr()
		in := &dynamodb.UpdateItemInput{
			TableName:              d.tableName(),
			Key:                    keyAV(k),
			UpdateExpression:       aws.String(e.update(u)),
			ConditionExpression:    aws.String(e.condition(conds, true, d.now())),
			ReturnValues:           types.ReturnValueAllNew,
			ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		}
		in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.namesOrNil(), e.valuesOrNil()
		out, err := d.client.UpdateItem(ctx, in)
		if err != nil {
			return 0, err
		}
		d.record("UpdateItem", deref(out.ConsumedCapacity)...)
		after, err = fromAVMap(out.Attributes)
		return 0, err
	})
	if err != nil {
		return nil, d.explainUpdateFailure(ctx, op, k, u, err)
	}
	// The result must itself be a valid item (an update may have grown it or broken an index key).
	if _, err := table.CheckItem(op, d.opts.Schema, after); err != nil {
		return nil, rookery.E(op, rookery.Internal, "DynamoDB accepted an update that makes an invalid item", err)
	}
	return after, nil
}

// explainUpdateFailure turns DynamoDB's rejection of an update whose result would be invalid (over
// the size limit, or a non-number added to) into the Kind the table contract names, by applying the
// update to the current item the way the contract defines it, rather than by reading error text.
func (d *DB) explainUpdateFailure(ctx context.Context, op rookery.Op, k table.Key, u table.Update, err error) error {
	if k := rookery.KindOf(err); k != rookery.Internal {
		return err
	}
	old, gerr := d.getRaw(ctx, op, k)
	if gerr != nil {
		return err
	}
	if old != nil && table.Expired(old, d.now()) {
		old = nil
	}
	next, aerr := table.ApplyUpdate(op, old, k, u)
	if aerr != nil {
		return aerr
	}
	if _, cerr := table.CheckItem(op, d.opts.Schema, next); cerr != nil {
		return cerr
	}
	return err
}

func deref(cc *types.ConsumedCapacity) []types.ConsumedCapacity {
	if cc == nil {
		return nil
	}
	return []types.ConsumedCapacity{*cc}
}

// retryExpired runs write, which returns the SDK's error and, for a cancelled transaction, the
// index of the write whose condition failed. Every conditional write carries the guard that its
// item is not expired; when a condition fails, retryExpired reads the item: if it is expired it is
// deleted (only if still expired with the same TTL) and the write runs again, so an expired item
// behaves exactly as an absent one; otherwise the failure is a Conflict.
func (d *DB) retryExpired(ctx context.Context, op rookery.Op, keys []table.Key, write func() (failed int, err error)) error {
	for attempt := 0; ; attempt++ {
		failed, err := write()
		if err == nil {
			return nil
		}
		terr := translate(op, err)
		if !rookery.IsKind(terr, rookery.Conflict) || attempt >= 5 {
			return terr
		}
		old, gerr := d.getRaw(ctx, op, keys[failed])
		if gerr != nil {
			return gerr
		}
		if old == nil || !table.Expired(old, d.now()) {
			return terr
		}
		e := newExpr()
		cond := e.name(table.TTL) + " = " + e.value(old[table.TTL])
		_, derr := d.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName:                 d.tableName(),
			Key:                       keyAV(keys[failed]),
			ConditionExpression:       aws.String(cond),
			ExpressionAttributeNames:  e.names,
			ExpressionAttributeValues: e.values,
		})
		if derr != nil && !rookery.IsKind(translate(op, derr), rookery.Conflict) {
			return translate(op, derr)
		}
	}
}

// TransactWrite implements table.Table.
func (d *DB) TransactWrite(ctx context.Context, writes []table.Write) error {
	const op rookery.Op = "dynamo.TransactWrite"
	writes, err := table.CheckWrites(op, d.opts.Schema, writes)
	if err != nil {
		return err
	}
	keys := make([]table.Key, len(writes))
	for i, w := range writes {
		if w.Kind == table.WritePut {
			keys[i] = w.Item.Key()
		} else {
			keys[i] = w.Key
		}
	}
	err = d.retryExpired(ctx, op, keys, func() (int, error) {
		items := make([]types.TransactWriteItem, len(writes))
		now := d.now()
		for i, w := range writes {
			e := newExpr()
			switch w.Kind {
			case table.WritePut:
				p := &types.Put{TableName: d.tableName(), Item: toAVMap(w.Item)}
				if len(w.Conds) > 0 {
					p.ConditionExpression = aws.String(e.condition(w.Conds, true, now))
				}
				p.ExpressionAttributeNames, p.ExpressionAttributeValues = e.namesOrNil(), e.valuesOrNil()
				items[i].Put = p
			case table.WriteUpdate:
				u := &types.Update{TableName: d.tableName(), Key: keyAV(w.Key), UpdateExpression: aws.String(e.update(w.Update))}
				u.ConditionExpression = aws.String(e.condition(w.Conds, true, now))
				u.ExpressionAttributeNames, u.ExpressionAttributeValues = e.namesOrNil(), e.valuesOrNil()
				items[i].Update = u
			case table.WriteDelete:
				del := &types.Delete{TableName: d.tableName(), Key: keyAV(w.Key)}
				if len(w.Conds) > 0 {
					del.ConditionExpression = aws.String(e.condition(w.Conds, true, now))
				}
				del.ExpressionAttributeNames, del.ExpressionAttributeValues = e.namesOrNil(), e.valuesOrNil()
				items[i].Delete = del
			case table.WriteCheck:
				c := &types.ConditionCheck{TableName: d.tableName(), Key: keyAV(w.Key)}
				c.ConditionExpression = aws.String(e.condition(w.Conds, true, now))
				c.ExpressionAttributeNames, c.ExpressionAttributeValues = e.namesOrNil(), e.valuesOrNil()
				items[i].ConditionCheck = c
			}
		}
		out, err := d.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems:          items,
			ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		})
		if err != nil {
			return cancelled(err)
		}
		d.record("TransactWriteItems", out.ConsumedCapacity...)
		return 0, nil
	})
	if err == nil {
		return nil
	}
	if rookery.IsKind(err, rookery.Conflict) {
		var ce *table.ConditionError
		if errors.As(err, &ce) {
			return rookery.E(op, rookery.Conflict, "transaction cancelled: a condition failed", ce)
		}
	}
	if rookery.IsKind(err, rookery.Internal) {
		// DynamoDB rejects an update whose result is invalid (too large) with a validation error.
		for _, w := range writes {
			if w.Kind == table.WriteUpdate {
				if xerr := d.explainUpdateFailure(ctx, op, w.Key, w.Update, err); !rookery.IsKind(xerr, rookery.Internal) {
					return xerr
				}
			}
		}
	}
	return err
}

// cancelled interprets a TransactWriteItems error: a cancellation caused by a failed condition
// becomes a Conflict naming the first failed write; one caused by a conflicting transaction is
// Unavailable (retry); anything else is translated as usual.
func cancelled(err error) (int, error) {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return 0, err
	}
	for i, r := range tce.CancellationReasons {
		if aws.ToString(r.Code) == "ConditionalCheckFailed" {
			return i, &conditionFailed{ce: &table.ConditionError{Index: i}, cause: err}
		}
	}
	return 0, rookery.E(rookery.Unavailable, "transaction cancelled by a conflicting request; retry", err)
}

// conditionFailed carries a transaction's failed write through translate as a Conflict.
type conditionFailed struct {
	ce    *table.ConditionError
	cause error
}

func (c *conditionFailed) Error() string { return c.ce.Error() }
func (c *conditionFailed) Unwrap() []error {
	return []error{c.ce, &types.ConditionalCheckFailedException{Message: aws.String(c.cause.Error())}}
}

// Query implements table.Table.
func (d *DB) Query(ctx context.Context, q table.Query) (table.Page, error) {
	const op rookery.Op = "dynamo.Query"
	ix, limit, err := table.CheckQuery(op, d.opts.Schema, q)
	if err != nil {
		return table.Page{}, err
	}
	pkAttr, skAttr := table.PK, table.SK
	if q.Index != "" {
		pkAttr, skAttr = ix.PK, ix.SK
	}
	var start map[string]types.AttributeValue
	if q.Cursor != "" {
		pos, err := d.cursors.Open(op, q)
		if err != nil {
			return table.Page{}, err
		}
		start = keyAV(pos.Key)
		if q.Index != "" {
			start[ix.PK] = &types.AttributeValueMemberS{Value: q.PK}
			start[ix.SK] = &types.AttributeValueMemberS{Value: pos.IndexSK}
		}
	}
	now := d.now()
	var items []table.Item
	// Ask for one more item than the page holds, to know whether another page exists; expired
	// items are filtered after DynamoDB's limit applies, so a round may come back short.
	for len(items) <= limit {
		e := newExpr()
		in := &dynamodb.QueryInput{
			TableName:              d.tableName(),
			KeyConditionExpression: aws.String(e.keyCondition(pkAttr, skAttr, q.PK, q.SK)),
			ScanIndexForward:       aws.Bool(!q.Desc),
			Limit:                  aws.Int32(int32(limit + 1 - len(items))),
			ExclusiveStartKey:      start,
			ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		}
		t := e.name(table.TTL)
		in.FilterExpression = aws.String("attribute_not_exists(" + t + ") OR " + t + " > " + e.value(now))
		if q.KeysOnly || len(q.Attributes) > 0 {
			names := []string{e.name(table.PK), e.name(table.SK)}
			if q.Index != "" {
				names = append(names, e.name(ix.PK), e.name(ix.SK))
			}
			if !q.KeysOnly {
				for _, a := range q.Attributes {
					// DynamoDB refuses a projection that names an attribute twice.
					if n := e.name(a); !slices.Contains(names, n) {
						names = append(names, n)
					}
				}
			}
			in.ProjectionExpression = aws.String(strings.Join(names, ", "))
		}
		in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.names, e.values
		if q.Index != "" {
			in.IndexName = aws.String(q.Index)
		} else {
			in.ConsistentRead = aws.Bool(true)
		}
		out, err := d.client.Query(ctx, in)
		if err != nil {
			return table.Page{}, translate(op, err)
		}
		d.record("Query", deref(out.ConsumedCapacity)...)
		for _, m := range out.Items {
			it, err := fromAVMap(m)
			if err != nil {
				return table.Page{}, rookery.E(op, rookery.Internal, err)
			}
			items = append(items, it)
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		start = out.LastEvaluatedKey
	}
	page := table.Page{Items: items}
	if len(items) > limit {
		page.Items = items[:limit]
		last := items[limit-1]
		page.Next = d.cursors.Seal(q, table.Position{Key: last.Key(), IndexSK: last.String(ix.SK)})
	}
	if q.KeysOnly {
		page.Keys = make([]table.Key, len(page.Items))
		for i, it := range page.Items {
			page.Keys[i] = it.Key()
		}
		page.Items = nil
	}
	return page, nil
}
