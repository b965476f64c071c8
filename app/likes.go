package app

import (
	"context"
	"errors"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
)

// Event types of likes.
const (
	LikeCreated = "LikeCreated"
	LikeDeleted = "LikeDeleted"
)

// LikePayload is the payload of LikeCreated and LikeDeleted, version 1.
type LikePayload struct {
	PostID   string       `json:"post_id"`
	AuthorID string       `json:"author_id"`
	UserID   string       `json:"user_id"`
	At       rookery.Time `json:"at"`
}

// Like is one like of a post, as the API lists it.
type Like struct {
	UserID  string       `json:"user_id"`
	LikedAt rookery.Time `json:"liked_at"`
}

func likeEdgeKey(post, user string) string { return "like:" + post + ":" + user }

// checkLiker validates a like or unlike of post by user: only user, or a server token, may like as
// user, who must exist.
func (a *App) checkLiker(ctx context.Context, op rookery.Op, post, user string) error {
	var fe rookery.FieldErrors
	if !validPostID(post) {
		fe.Add("id", "is not a post id")
	}
	if !rookery.ValidUserID(user) {
		fe.Add("user", "must be 1 to 64 characters of A-Z, a-z, 0-9, _ and -")
	}
	if err := fe.Err(op); err != nil {
		return err
	}
	if err := actAs(ctx, op, user); err != nil {
		return err
	}
	if _, err := a.liveUser(ctx, user); rookery.IsKind(err, rookery.NotFound) {
		return rookery.E(op, rookery.NotFound, "user not found")
	} else if err != nil {
		return err
	}
	return nil
}

// checkLike is checkLiker, and returns the post, which user must be able to see.
func (a *App) checkLike(ctx context.Context, op rookery.Op, post, user string) (rookery.Post, error) {
	if err := a.checkLiker(ctx, op, post, user); err != nil {
		return rookery.Post{}, err
	}
	return a.postAs(ctx, op, post, user)
}

// LikePost records that user likes post (seed 000 B7: a conditional put); liking again is a
// success that changes nothing. The post must exist and be visible to user (else NotFound).
func (a *App) LikePost(ctx context.Context, post, user string) error {
	const op rookery.Op = "app.LikePost"
	p, err := a.checkLike(ctx, op, post, user)
	if err != nil {
		return err
	}
	now := a.clock.Now().UTC().Truncate(time.Millisecond)
	ev, err := a.event(ctx, LikeCreated, likeEdgeKey(post, user), LikePayload{PostID: post, AuthorID: p.Author.ID, UserID: user, At: rookery.Time{Time: now}}, now)
	if err != nil {
		return rookery.E(op, rookery.Internal, err)
	}
	defer a.likeChange(user)()
	err = a.writeWithEvent(ctx, []table.Write{
		table.PutWrite(likeItem(post, user, now), table.NotExists(table.PK)),
		table.CheckWrite(postKey(post), table.Exists(table.PK)),
	}, ev)
	var ce *table.ConditionError
	switch {
	case errors.As(err, &ce) && ce.Index == 0:
		return nil // liked before
	case errors.As(err, &ce) && ce.Index == 1:
		return rookery.E(op, rookery.NotFound, "post not found") // deleted meanwhile
	}
	return err
}

// UnlikePost removes user's like of post; it succeeds also when there was none. A like is its
// liker's to take back also from a post they can no longer see (a block stands between them and
// its author, or they stopped following the author of a followers-only post); the reply then
// tells them no more than that their like was there.
func (a *App) UnlikePost(ctx context.Context, post, user string) error {
	const op rookery.Op = "app.UnlikePost"
	if err := a.checkLiker(ctx, op, post, user); err != nil {
		return err
	}
	p, err := a.postAs(ctx, op, post, user)
	if err == nil {
		return a.removeLike(ctx, post, p.Author.ID, user)
	}
	if !rookery.IsKind(err, rookery.NotFound) && !rookery.IsKind(err, rookery.Forbidden) {
		return err
	}
	if _, lerr := a.table.Get(ctx, likeKey(post, user)); lerr != nil {
		if rookery.IsKind(lerr, rookery.NotFound) {
			return err
		}
		return lerr
	}
	it, perr := a.table.Get(ctx, postKey(post))
	if perr != nil {
		if rookery.IsKind(perr, rookery.NotFound) {
			return err // deleted: a deleted post keeps its likes, and no read shows them
		}
		return perr
	}
	return a.removeLike(ctx, post, it.String("author_id"), user)
}

// removeLike removes user's like of post (by author), with its LikeDeleted event; when there is
// none it does nothing and succeeds.
func (a *App) removeLike(ctx context.Context, post, author, user string) error {
	now := a.clock.Now().UTC().Truncate(time.Millisecond)
	ev, err := a.event(ctx, LikeDeleted, likeEdgeKey(post, user), LikePayload{PostID: post, AuthorID: author, UserID: user, At: rookery.Time{Time: now}}, now)
	if err != nil {
		return rookery.E("app.removeLike", rookery.Internal, err)
	}
	defer a.likeChange(user)()
	err = a.writeWithEvent(ctx, []table.Write{table.DeleteWrite(likeKey(post, user), table.Exists(table.PK))}, ev)
	var ce *table.ConditionError
	if errors.As(err, &ce) {
		return nil // not liked
	}
	return err
}

// Likes lists the likes of post, newest first, for a caller who can see the post, but those of
// users a block stands between the caller and (blockedFor).
func (a *App) Likes(ctx context.Context, post, cursor string, limit int) (Page[Like], error) {
	const op rookery.Op = "app.Likes"
	if err := limitErr(op, limit); err != nil {
		return Page[Like]{}, err
	}
	if _, err := a.Post(ctx, post); err != nil {
		return Page[Like]{}, err
	}
	q, err := a.table.Query(ctx, withCursor(likesQuery(post), limit, cursor))
	if err != nil {
		return Page[Like]{}, err
	}
	likers := make([]string, len(q.Items))
	for i, it := range q.Items {
		likers[i] = it.String("user_id")
	}
	gone, err := a.goneUsers(ctx, likers...)
	if err != nil {
		return Page[Like]{}, err
	}
	blocked, err := a.blockedFor(ctx, likers)
	if err != nil {
		return Page[Like]{}, err
	}
	out := Page[Like]{Items: make([]Like, 0, len(q.Items)), Next: q.Next}
	for _, it := range q.Items {
		// A deleted user's stays until the erasure deletes it; a blocked one's stays for others.
		if id := it.String("user_id"); !gone[id] && !blocked[id] {
			out.Items = append(out.Items, Like{UserID: it.String("user_id"), LikedAt: rookery.Time{Time: time.UnixMilli(it.Int("liked_at")).UTC()}})
		}
	}
	return out, nil
}
