package rookery

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"reflect"

	"github.com/rookery/rookery/sdk/go/api"
)

// pages iterates over every item of a list, reading a page of limit at a time (0: the server's
// default) with fetch, which calls a generated list operation (whose 200 reply is
// {"items","next_cursor"}), until the last page. An error is yielded, and ends the iteration.
func pages[T any](ctx context.Context, limit int, fetch func(ctx context.Context, limit *int, cursor *string) (any, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		var lim *int
		if limit > 0 {
			lim = &limit
		}
		var cursor *string
		for {
			r, err := fetch(ctx, lim, cursor)
			var items []T
			var next *string
			if err == nil {
				items, next, err = listPage[T](r)
			}
			if err != nil {
				yield(zero, err)
				return
			}
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			if next == nil || *next == "" {
				return
			}
			cursor = next
		}
	}
}

// listPage reads a generated list reply: its HTTPResponse and Body (a problem is an *Error), and
// its JSON200's Items and NextCursor.
func listPage[T any](r any) ([]T, *string, error) {
	v := reflect.ValueOf(r).Elem()
	resp, _ := v.FieldByName("HTTPResponse").Interface().(*http.Response)
	body, _ := v.FieldByName("Body").Interface().([]byte)
	if err := Check(resp, body, nil); err != nil {
		return nil, nil, err
	}
	ok := v.FieldByName("JSON200")
	if ok.IsNil() {
		return nil, nil, fmt.Errorf("rookery: %d reply without a list", resp.StatusCode)
	}
	items, _ := ok.Elem().FieldByName("Items").Interface().([]T)
	next, _ := ok.Elem().FieldByName("NextCursor").Interface().(*string)
	return items, next, nil
}

// HomeFeed iterates over the caller's home feed, newest first, limit posts a page.
func (c *Client) HomeFeed(ctx context.Context, limit int) iter.Seq2[api.Post, error] {
	return pages[api.Post](ctx, limit, func(ctx context.Context, l *int, cur *string) (any, error) {
		return c.GetHomeFeedWithResponse(ctx, &api.GetHomeFeedParams{Limit: l, Cursor: cur})
	})
}

// UserPosts iterates over user's posts that the caller may see, newest first.
func (c *Client) UserPosts(ctx context.Context, user string, limit int) iter.Seq2[api.Post, error] {
	return pages[api.Post](ctx, limit, func(ctx context.Context, l *int, cur *string) (any, error) {
		return c.ListUserPostsWithResponse(ctx, user, &api.ListUserPostsParams{Limit: l, Cursor: cur})
	})
}

// TagPosts iterates over the posts with tag, newest first.
func (c *Client) TagPosts(ctx context.Context, tag string, limit int) iter.Seq2[api.Post, error] {
	return pages[api.Post](ctx, limit, func(ctx context.Context, l *int, cur *string) (any, error) {
		return c.ListTagPostsWithResponse(ctx, tag, &api.ListTagPostsParams{Limit: l, Cursor: cur})
	})
}

// Followers iterates over user's followers, newest first.
func (c *Client) Followers(ctx context.Context, user string, limit int) iter.Seq2[api.Follow, error] {
	return pages[api.Follow](ctx, limit, func(ctx context.Context, l *int, cur *string) (any, error) {
		return c.ListFollowersWithResponse(ctx, user, &api.ListFollowersParams{Limit: l, Cursor: cur})
	})
}

// Following iterates over whom user follows, newest first.
func (c *Client) Following(ctx context.Context, user string, limit int) iter.Seq2[api.Follow, error] {
	return pages[api.Follow](ctx, limit, func(ctx context.Context, l *int, cur *string) (any, error) {
		return c.ListFollowingWithResponse(ctx, user, &api.ListFollowingParams{Limit: l, Cursor: cur})
	})
}

// Blocks iterates over whom user blocked, by user id (only user, or a server token, may read it).
func (c *Client) Blocks(ctx context.Context, user string, limit int) iter.Seq2[api.Blocked, error] {
	return pages[api.Blocked](ctx, limit, func(ctx context.Context, l *int, cur *string) (any, error) {
		return c.ListBlocksWithResponse(ctx, user, &api.ListBlocksParams{Limit: l, Cursor: cur})
	})
}

// Mutes iterates over whom user muted, by user id (only user, or a server token, may read it).
func (c *Client) Mutes(ctx context.Context, user string, limit int) iter.Seq2[api.Muted, error] {
	return pages[api.Muted](ctx, limit, func(ctx context.Context, l *int, cur *string) (any, error) {
		return c.ListMutesWithResponse(ctx, user, &api.ListMutesParams{Limit: l, Cursor: cur})
	})
}

// Comments iterates over a post's comments, oldest first.
func (c *Client) Comments(ctx context.Context, post string, limit int) iter.Seq2[api.Comment, error] {
	return pages[api.Comment](ctx, limit, func(ctx context.Context, l *int, cur *string) (any, error) {
		return c.ListCommentsWithResponse(ctx, post, &api.ListCommentsParams{Limit: l, Cursor: cur})
	})
}

// Likes iterates over a post's likes, newest first.
func (c *Client) Likes(ctx context.Context, post string, limit int) iter.Seq2[api.Like, error] {
	return pages[api.Like](ctx, limit, func(ctx context.Context, l *int, cur *string) (any, error) {
		return c.ListLikesWithResponse(ctx, post, &api.ListLikesParams{Limit: l, Cursor: cur})
	})
}

// Notifications iterates over the caller's notifications, newest first (only the unread ones if
// unread).
func (c *Client) Notifications(ctx context.Context, unread bool, limit int) iter.Seq2[api.Notification, error] {
	return pages[api.Notification](ctx, limit, func(ctx context.Context, l *int, cur *string) (any, error) {
		return c.ListNotificationsWithResponse(ctx, &api.ListNotificationsParams{Limit: l, Cursor: cur, Unread: &unread})
	})
}
