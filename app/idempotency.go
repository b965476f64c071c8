package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
)

// Idempotency-Key (API.md, Conventions): a create retried with the same key and body returns the
// first result; the same key with another body is Conflict. Keys belong to the caller (a server
// token acting for a user is a caller of its own) and are remembered for idempotencyTTL.

const (
	idempotencyTTL = 25 * time.Hour   // "at least 24 hours"
	claimTTL       = 60 * time.Second // a claim whose request died is released after this
)

// Replay is a remembered result.
type Replay struct {
	Status int
	Body   []byte
}

// ValidIdempotencyKey: 1..128 printable ASCII characters.
func ValidIdempotencyKey(k string) bool {
	if k == "" || len(k) > 128 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

func (a *App) idemKey(ctx context.Context, op rookery.Op, key string) (table.Key, error) {
	c, err := caller(ctx, op)
	if err != nil {
		return table.Key{}, err
	}
	if !ValidIdempotencyKey(key) {
		return table.Key{}, rookery.FieldErrors{{Name: "Idempotency-Key", Reason: "must be 1 to 128 printable ASCII characters"}}.Err(op)
	}
	sum := sha256.Sum256([]byte(key))
	who := c.UserID
	if c.Server {
		who = "server:" + c.UserID + ":" + c.OnBehalfOf
	}
	return idempotencyKey(hex.EncodeToString([]byte(who)), hex.EncodeToString(sum[:])), nil
}

// BeginIdempotent claims key for a request with body. It returns the remembered result if the
// same request completed before (the caller replays it), Conflict if the key was used with another
// body or the first request is still running, and nil otherwise: the caller runs the request and
// then calls FinishIdempotent.
func (a *App) BeginIdempotent(ctx context.Context, key string, body []byte) (*Replay, error) {
	const op rookery.Op = "app.BeginIdempotent"
	k, err := a.idemKey(ctx, op, key)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	claim := table.Item{table.PK: k.PK, table.SK: k.SK, "body_hash": hash, "state": "running",
		table.TTL: a.clock.Now().Add(claimTTL).Unix()}
	err = a.table.Put(ctx, claim, table.NotExists(table.PK))
	if err == nil {
		return nil, nil
	}
	if !rookery.IsKind(err, rookery.Conflict) {
		return nil, err
	}
	old, err := a.table.Get(ctx, k)
	if rookery.IsKind(err, rookery.NotFound) {
		return nil, stillRunning(op)
	} else if err != nil {
		return nil, err
	}
	switch {
	case old.String("body_hash") != hash:
		return nil, rookery.E(op, rookery.Conflict, "this Idempotency-Key was used with a different request body")
	case old.String("state") != "done":
		return nil, stillRunning(op)
	}
	return &Replay{Status: int(old.Int("status")), Body: old.Bytes("response")}, nil
}

// stillRunning is the Conflict of a key whose first request has not finished (or, NotFound above,
// has just failed and let the key go): unlike a key used with another body, it ends by itself, so
// it carries a Retry-After for clients (the SDKs) that retry a request that got no answer.
func stillRunning(op rookery.Op) error {
	return rookery.RetryAfter(rookery.E(op, rookery.Conflict, "a request with this Idempotency-Key is being processed; retry"), time.Second)
}

// FinishIdempotent records the result of the request that claimed key, to be replayed for its
// retries. A result that should not be remembered (a server error: the retry should run again)
// releases the claim instead.
func (a *App) FinishIdempotent(ctx context.Context, key string, status int, response []byte) error {
	const op rookery.Op = "app.FinishIdempotent"
	k, err := a.idemKey(ctx, op, key)
	if err != nil {
		return err
	}
	if status >= 500 {
		return a.table.Delete(ctx, k)
	}
	_, err = a.table.Update(ctx, k, table.Update{Set: map[string]any{
		"state": "done", "status": int64(status), "response": response,
		table.TTL: a.clock.Now().Add(idempotencyTTL).Unix(),
	}}, table.Exists(table.PK))
	return err
}
