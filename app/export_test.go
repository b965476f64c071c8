package app

import (
	"context"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
)

// Hooks for the benchmarks that build worlds too large to build through the API.

// FollowItemForTest is the stored follow edge follower -> followee made at at.
func FollowItemForTest(follower, followee string, at time.Time) table.Item {
	return followItem(follower, followee, at)
}

// UserKeyForTest is the key of user id's item.
func UserKeyForTest(id string) table.Key { return userKey(id) }

// AppendStreamForTest appends an event to user's stream log, as the consumers do.
func (a *App) AppendStreamForTest(ctx context.Context, users []string, src, typ string, data any) error {
	return a.appendStream(ctx, users, src, typ, data)
}

// LikeItemForTest is the stored like of post by user made at at.
func LikeItemForTest(post, user string, at time.Time) table.Item { return likeItem(post, user, at) }

// WebhookMessageForTest is the webhook message of event ev (its type and data), as the webhooks
// consumer makes it.
func (a *App) WebhookMessageForTest(ctx context.Context, ev rookery.Event) (string, any, error) {
	return a.webhookMessage(ctx, ev)
}
