package app

import (
	"context"
	"errors"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
)

// Event types of comments.
const (
	CommentCreated = "CommentCreated"
	CommentDeleted = "CommentDeleted"
)

// CommentPayload is the payload of CommentCreated and CommentDeleted, version 1.
type CommentPayload struct {
	CommentID string       `json:"comment_id"`
	PostID    string       `json:"post_id"`
	PostOwner string       `json:"post_author_id"`
	AuthorID  string       `json:"author_id"`
	At        rookery.Time `json:"at"`
}

// Comment is a comment as the API shows it.
type Comment struct {
	ID        string         `json:"id"`
	PostID    string         `json:"post_id"`
	Author    rookery.Author `json:"author"`
	Text      string         `json:"text"`
	CreatedAt rookery.Time   `json:"created_at"`
}

// CommentInput is the body of POST /v1/posts/{id}/comments.
type CommentInput struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

const maxCommentText = 2000

// idWindow is how far from now the time in a client-chosen comment id may be: enough for retries.
const idWindow = 10 * time.Minute

func commentFromItem(it table.Item, author rookery.Author) Comment {
	return Comment{ID: it.String("id"), PostID: it.String("post_id"), Author: author, Text: it.String("text"),
		CreatedAt: rookery.Time{Time: time.UnixMilli(it.Int("created_at")).UTC()}}
}

// AddComment adds a comment by the acting user to post, which they must be able to see. Sending
// the same id again returns the comment as it is (created false); an id used for other text is
// Conflict.
func (a *App) AddComment(ctx context.Context, post string, in CommentInput) (c Comment, created bool, err error) {
	const op rookery.Op = "app.AddComment"
	author, err := actingUser(ctx, op)
	if err != nil {
		return c, false, err
	}
	var fe rookery.FieldErrors
	if n := len([]rune(in.Text)); n < 1 || n > maxCommentText || blank(in.Text) {
		fe.Add("text", "must be 1 to 2000 characters, not only spaces")
	}
	id := in.ID
	if id != "" {
		// Comments list in id order (seed 000 FEED-006), so a client's id must carry about now.
		u, perr := ulid.ParseStrict(id)
		if d := a.clock.Now().Sub(ulid.Time(u.Time())); perr != nil || d > idWindow || d < -idWindow {
			fe.Add("id", "must be a ULID made within the last 10 minutes")
		}
	} else {
		id = a.ids()
	}
	if err := fe.Err(op); err != nil {
		return c, false, err
	}
	p, err := a.postAs(ctx, op, post, author)
	if err != nil {
		return c, false, err
	}
	user, err := a.liveUser(ctx, author)
	if rookery.IsKind(err, rookery.NotFound) {
		return c, false, rookery.E(op, rookery.NotFound, "the author is not a user")
	} else if err != nil {
		return c, false, err
	}
	now := a.clock.Now().UTC().Truncate(time.Millisecond)
	k := commentKey(post, id)
	item := table.Item{table.PK: k.PK, table.SK: k.SK, "id": id, "post_id": post, "author_id": author, "text": in.Text, "created_at": now.UnixMilli(),
		gsi1.PK: commentsByPK(author), gsi1.SK: commentIndexSK(post, id, now)}
	ev, err := a.event(ctx, CommentCreated, "comment:"+post+":"+id, CommentPayload{CommentID: id, PostID: post, PostOwner: p.Author.ID, AuthorID: author, At: rookery.Time{Time: now}}, now)
	if err != nil {
		return c, false, rookery.E(op, rookery.Internal, err)
	}
	err = a.writeWithEvent(ctx, []table.Write{
		table.PutWrite(item, table.NotExists(table.PK)),
		table.CheckWrite(postKey(post), table.Exists(table.PK)),
	}, ev)
	var ce *table.ConditionError
	switch {
	case err == nil:
		return commentFromItem(item, authorOf(user)), true, nil
	case errors.As(err, &ce) && ce.Index == 0:
		old, gerr := a.table.Get(ctx, k)
		if gerr != nil {
			return c, false, gerr
		}
		if old.String("author_id") != author || old.String("text") != in.Text {
			return c, false, rookery.E(op, rookery.Conflict, "a comment with this id exists")
		}
		return commentFromItem(old, authorOf(user)), false, nil
	case errors.As(err, &ce):
		return c, false, rookery.E(op, rookery.NotFound, "post not found")
	}
	return c, false, err
}

// Comments lists post's comments, oldest first, for a caller who can see the post, but those of
// users a block stands between the caller and (blockedFor).
func (a *App) Comments(ctx context.Context, post, cursor string, limit int) (Page[Comment], error) {
	const op rookery.Op = "app.Comments"
	if err := limitErr(op, limit); err != nil {
		return Page[Comment]{}, err
	}
	if _, err := a.Post(ctx, post); err != nil {
		return Page[Comment]{}, err
	}
	q, err := a.table.Query(ctx, withCursor(commentsQuery(post), limit, cursor))
	if err != nil {
		return Page[Comment]{}, err
	}
	users, gone, err := a.usersOf(ctx, q.Items, "author_id")
	if err != nil {
		return Page[Comment]{}, err
	}
	authors := make([]string, len(q.Items))
	for i, it := range q.Items {
		authors[i] = it.String("author_id")
	}
	blocked, err := a.blockedFor(ctx, authors)
	if err != nil {
		return Page[Comment]{}, err
	}
	out := Page[Comment]{Items: make([]Comment, 0, len(q.Items)), Next: q.Next}
	for _, it := range q.Items {
		// A deleted user's stays until the erasure deletes it; a blocked one's stays for others.
		if id := it.String("author_id"); !gone[id] && !blocked[id] {
			out.Items = append(out.Items, commentFromItem(it, users[it.String("author_id")]))
		}
	}
	return out, nil
}

// DeleteComment deletes comment id of post: its author, the post's author, or a server token may.
func (a *App) DeleteComment(ctx context.Context, post, id string) error {
	const op rookery.Op = "app.DeleteComment"
	if !validPostID(id) {
		return rookery.FieldErrors{{Name: "comment", Reason: "is not a comment id"}}.Err(op)
	}
	p, err := a.Post(ctx, post)
	if err != nil {
		return err
	}
	old, err := a.table.Get(ctx, commentKey(post, id))
	if rookery.IsKind(err, rookery.NotFound) {
		return rookery.E(op, rookery.NotFound, "comment not found")
	} else if err != nil {
		return err
	}
	c, _ := rookery.CallerFrom(ctx)
	if !(c.Server && c.OnBehalfOf == "" || c.Acting() == old.String("author_id") || c.Acting() == p.Author.ID) {
		return rookery.E(op, rookery.Forbidden, "only the comment's author or the post's author may delete it")
	}
	err = a.removeComment(ctx, p.Author.ID, old)
	if rookery.IsKind(err, rookery.Conflict) {
		return rookery.E(op, rookery.NotFound, "comment not found") // deleted meanwhile
	}
	return err
}

// removeComment deletes comment item old of a post by postOwner, with its CommentDeleted event:
// Conflict if it is gone already.
func (a *App) removeComment(ctx context.Context, postOwner string, old table.Item) error {
	post, id := old.String("post_id"), old.String("id")
	now := a.clock.Now().UTC().Truncate(time.Millisecond)
	ev, err := a.event(ctx, CommentDeleted, "comment:"+post+":"+id, CommentPayload{CommentID: id, PostID: post, PostOwner: postOwner, AuthorID: old.String("author_id"), At: rookery.Time{Time: now}}, now)
	if err != nil {
		return rookery.E("app.removeComment", rookery.Internal, err)
	}
	return a.writeWithEvent(ctx, []table.Write{table.DeleteWrite(commentKey(post, id), table.Exists(table.PK))}, ev)
}
