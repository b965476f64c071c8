package table

import "context"

type unsyncedKey struct{}

// WithoutSync marks ctx so that a store which syncs its writes to disk (table/pebble) may leave
// the writes made under it unsynced: a crash may lose the latest of them. Use it only for writes
// whose loss a crash makes good by itself, such as an event consumer's when the event log keeps
// its offsets in the same engine after them (a lost write takes its event's offset with it, and
// the event is handled again). Stores that do not sync ignore it.
func WithoutSync(ctx context.Context) context.Context {
	return context.WithValue(ctx, unsyncedKey{}, true)
}

// SyncWaived reports whether ctx was marked by WithoutSync.
func SyncWaived(ctx context.Context) bool {
	v, _ := ctx.Value(unsyncedKey{}).(bool)
	return v
}
