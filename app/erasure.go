package app

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
)

// Account deletion. DeleteUser replaces the user's item with a tombstone, in one transaction with
// the username's claim (kept, marked deleted, until the grace period ends) and the UserDeleted
// event. From then on every read treats the user as gone: the tombstone is what they find when
// they read the user (profiles, authors of posts and comments, actors of notifications, likers,
// followers, leaderboards). The erasure consumer then deletes what the user had, through the
// indexes that list it (never a scan), with the same events as the user's own deletes would make,
// so that counters, timelines, leaderboards and streams follow:
//
//	what                                how it is found                   how it goes
//	posts (the live ones: a post deleted before keeps what others left on it, as any deleted
//	post does), and others' likes and comments on them
//	                                    GSI1 USER#<u>; POST#<post>        others' deleted, then removePost (PostDeleted)
//	comments                            GSI1 COMMENTS#<u>                 removeComment (CommentDeleted)
//	likes                               GSI1 LIKED#<u>                    removeLike (LikeDeleted)
//	follows, both ways                  GSI1 FOLLOWING#<u>, GSI3 FOLLOWEE#<u>  removeFollow (FollowDeleted)
//	notifications they caused           GSI1 NOTIFBY#<u>                  deleted (with a like's ref)
//	their id in mentions of others' posts  NOTIF#<u> (mentions)           unmention (reads hide it at once)
//	their blocks and mutes; others' of them  BLOCK#<u>, MUTE#<u>; GSI3 BLOCKED#<u>, MUTED#<u>  deleted
//	their notifications, activities, daily points, scores, stream log
//	                                    NOTIF#<u>, ACT#<u>, SCORE#<u>, STREAM#<u>  deleted
//	streak (and its board entry), presence  STREAK#<u>, STREAMERS/<u>      deleted
//	home timeline                       timeline.Store.Delete
//
// A crash anywhere leaves the UserDeleted event unacknowledged: it is handled again and erases what
// is left, in time proportional to that. Writes that raced the deletion (a like read the user just
// before the tombstone and committed just after) are caught by their own events: the same consumer
// reads, for every creating event, whether a party to it is gone, and erases that one thing. So
// nothing written after the tombstone stays, whichever order the events arrive in. What cannot be
// listed by user stays until it expires: idempotency records (25 hours) and activity claims (90
// days), which hold hashes, not content.

// UserDeleted is the event of an account deleted (DeleteUser).
const UserDeleted = "UserDeleted"

// UserDeletedPayload is the payload of UserDeleted, version 1.
type UserDeletedPayload struct {
	UserID   string       `json:"user_id"`
	Username string       `json:"username"`
	At       rookery.Time `json:"deleted_at"`
}

// ErasureGroup is the consumer group that erases deleted accounts.
const ErasureGroup = "erasure"

// DefaultDeletedGrace is how long a deleted user's username stays taken and their id cannot be
// used again (Deps.DeletedGrace).
const DefaultDeletedGrace = 30 * 24 * time.Hour

// DynamoIndexLag is how long after a change a query of a DynamoDB global secondary index may
// still miss it (usually well under a second); Pebble's indexes are exact. Erasure starts that
// long after the deletion (Deps.IndexLag), so that its index walks find everything written
// before the tombstone.
const DynamoIndexLag = 2 * time.Second

// userGone reports whether user item it is a deleted user's tombstone (or their username's claim).
func userGone(it table.Item) bool { return it != nil && it.Int("deleted_at") != 0 }

// DeleteUser deletes account id (the user, or a server token): from its return on, the user is
// gone from every read, and the erasure consumer deletes what they had. Their username stays taken
// for the grace period (Deps.DeletedGrace), and so does the id. Deleting a deleted user again is a
// success; an unknown id is NotFound.
func (a *App) DeleteUser(ctx context.Context, id string) error {
	const op rookery.Op = "app.DeleteUser"
	if err := validID(op, id); err != nil {
		return err
	}
	if err := actAs(ctx, op, id); err != nil {
		return err
	}
	defer a.gone.change(id)()
	for attempt := 0; attempt < 5; attempt++ {
		cur, err := a.table.Get(ctx, userKey(id))
		switch {
		case rookery.IsKind(err, rookery.NotFound):
			return rookery.E(op, rookery.NotFound, "user not found")
		case err != nil:
			return err
		case userGone(cur):
			// Perhaps a retry whose first attempt committed but never set the tombstone of the
			// author's copy: set it, so that reads stop showing the user now.
			a.authors.forget(ctx, id)
			return nil
		}
		now := a.clock.Now().UTC().Truncate(time.Millisecond)
		expires := now.Add(a.deletedGrace).Unix()
		name := cur.String("username")
		k, claim := userKey(id), usernameKey(name)
		tomb := table.Item{table.PK: k.PK, table.SK: k.SK, "id": id, "username": name, "deleted_at": now.UnixMilli(),
			"version": cur.Int("version") + 1, table.TTL: expires}
		ev, err := a.event(ctx, UserDeleted, "user:"+id, UserDeletedPayload{UserID: id, Username: name, At: rookery.Time{Time: now}}, now)
		if err != nil {
			return rookery.E(op, rookery.Internal, err)
		}
		err = a.writeWithEvent(ctx, []table.Write{
			table.PutWrite(tomb, table.VersionIs("version", cur.Int("version"))),
			table.PutWrite(table.Item{table.PK: claim.PK, table.SK: claim.SK, "user_id": id, "deleted_at": now.UnixMilli(), table.TTL: expires},
				table.Compare("user_id", table.OpEq, id)),
		}, ev)
		a.authors.forget(ctx, id) // whatever err says: a write that timed out may have committed
		switch {
		case err == nil:
			a.log.Info("account deleted; erasure queued", "user", id)
			return nil
		case rookery.IsKind(err, rookery.Conflict):
			continue // the profile changed under us: read again
		default:
			return err
		}
	}
	return rookery.E(op, rookery.Conflict, "the user is being changed concurrently; retry")
}

// liveUser reads user id: NotFound if there is none or it is a deleted user's tombstone.
func (a *App) liveUser(ctx context.Context, id string) (table.Item, error) {
	it, err := a.table.Get(ctx, userKey(id))
	if err == nil && userGone(it) {
		return nil, rookery.E("app.liveUser", rookery.NotFound, "user deleted")
	}
	return it, err
}

// liveAuthor is liveUser as an author. A process that is its table's only writer answers from its
// copy of the author's profile if it has one (exact there: every write of a profile sets the copy
// after its commit, and a deletion sets a tombstone, which reads as a miss).
func (a *App) liveAuthor(ctx context.Context, id string) (rookery.Author, error) {
	if a.soleWriter {
		if kept := a.authors.get(ctx, []string{id}); kept[0].item != nil {
			return authorOf(kept[0].item), nil
		}
	}
	it, err := a.liveUser(ctx, id)
	if err != nil {
		return rookery.Author{}, err
	}
	if a.soleWriter { // elsewhere the copy is not read here: keeping it would only cost a cache write
		a.authors.fill(ctx, it)
	}
	return authorOf(it), nil
}

// goneMentioned returns which of the users that posts mention (ids, with repeats) are deleted, so
// that no post shows a mention of them (view.show) from their deletion's reply on. It answers from
// what the process keeps where it can: its deletion marks (a.gone), else the authors' copies (a
// live user's copy is kept until their deletion sets its tombstone, as for the posts' authors);
// the rest are read (goneUsers).
func (a *App) goneMentioned(ctx context.Context, ids []string) (map[string]bool, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var gone map[string]bool
	var rest []string
	if a.gone != nil {
		for _, id := range ids {
			if g, ok := a.gone.get(id); !ok {
				rest = append(rest, id)
			} else if g {
				if gone == nil {
					gone = map[string]bool{}
				}
				gone[id] = true
			}
		}
	} else {
		for i, c := range a.authors.get(ctx, ids) {
			if c.item == nil {
				rest = append(rest, ids[i])
			}
		}
	}
	if len(rest) == 0 {
		return gone, nil
	}
	read, err := a.goneUsers(ctx, rest...)
	if err != nil {
		return nil, err
	}
	if gone == nil {
		return read, nil
	}
	maps.Copy(gone, read)
	return gone, nil
}

// goneUsers returns which of ids are deleted users (tombstones), with one batch read of those not
// known in process (a.gone). Unknown ids are not gone: they never were. Without a.gone, the live
// users read are kept as authors' copies, which goneMentioned reads first.
func (a *App) goneUsers(ctx context.Context, ids ...string) (map[string]bool, error) {
	gone := map[string]bool{}
	type toRead struct {
		id    string
		epoch uint64
		keep  bool // no change of the user was under way: what is read may be kept
	}
	var reads []toRead
	for _, id := range slices.Compact(slices.Sorted(slices.Values(ids))) { // DynamoDB refuses a key twice
		if !rookery.ValidUserID(id) {
			continue
		}
		if g, ok := a.gone.get(id); ok {
			if g {
				gone[id] = true
			}
			continue
		}
		epoch, keep := a.gone.begin(id)
		reads = append(reads, toRead{id, epoch, keep})
	}
	for batch := range slices.Chunk(reads, table.MaxBatchGet) {
		keys := make([]table.Key, len(batch))
		for i, r := range batch {
			keys[i] = userKey(r.id)
		}
		got, err := a.table.BatchGet(ctx, keys)
		if err != nil {
			return nil, err
		}
		var live []table.Item
		for i, it := range got {
			if userGone(it) {
				gone[batch[i].id] = true
			} else if it != nil && a.gone == nil {
				live = append(live, it)
			}
			if batch[i].keep {
				a.gone.keep(batch[i].id, batch[i].epoch, userGone(it))
			}
		}
		a.authors.fill(ctx, live...)
	}
	return gone, nil
}

// goneOf returns the users' deletion marks d's App keeps, nil for none: only a process that is its
// store's only writer (every write that makes or unmakes a tombstone, DeleteUser and PutUser,
// is bracketed by a change of the user). A tombstone that expires while kept stays gone here
// until its id is created again, which is what gone means for an id no one has (erasure
// finished with it).
func goneOf(d Deps) *keptByUser[bool] {
	if !d.SoleWriter {
		return nil
	}
	return newKeptByUser(goneKept, func(bool) int { return 1 })
}

// goneKept is how many users' deletion marks a process keeps (about 80 bytes each).
const goneKept = 200_000

// exists returns NotFound unless user is a live user: neither an id that was never created nor a
// deleted user's is. It answers from the process's copy of the profile where one is kept (as
// liveAuthor does), else reads it. The reads of a user's lists call it when their page is empty,
// the only page a user who does not exist can get, so that a list of theirs is 404 as the user is.
// The feed calls it on every page where no deletion marks are kept; where they are, it checks its
// reader against them on every page and calls this on an empty one. The notification routes and
// the unfollows call it always, so that a deleted user's own are 404 before the erasure.
func (a *App) exists(ctx context.Context, op rookery.Op, user string) error {
	if a.soleWriter {
		if kept := a.authors.get(ctx, []string{user}); kept[0].item != nil {
			return nil
		}
	}
	// What is read is not kept as an author's copy: those are few (DefaultPostCacheSize), for the
	// authors that pages show, and the users asked about here are any reader's.
	_, err := a.liveUser(ctx, user)
	if rookery.IsKind(err, rookery.NotFound) {
		return rookery.E(op, rookery.NotFound, "user not found")
	}
	return err
}

// notGone returns NotFound if user is a deleted user.
// An unknown user is not gone: the caller's own checks say what that means.
func (a *App) notGone(ctx context.Context, op rookery.Op, user string) error {
	gone, err := a.goneUsers(ctx, user)
	if err == nil && gone[user] {
		return rookery.E(op, rookery.NotFound, "user not found")
	}
	return err
}

// ApplyErasure is the erasure consumer's handler. UserDeleted erases the account; an event that
// created something (a follow, like, comment, post, notification, block, mute or activity) whose
// party is a deleted user erases that (see the top of this file). It is idempotent: whatever it
// deletes is deleted with a condition or not at all, and a redelivery finds less to do.
func (a *App) ApplyErasure(ctx context.Context, ev rookery.Event) error {
	const op rookery.Op = "app.ApplyErasure"
	bad := func(err error) error { return rookery.E(op, rookery.Invalid, "malformed event", err) }
	switch ev.Type {
	case UserDeleted:
		var p UserDeletedPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil || !rookery.ValidUserID(p.UserID) {
			return bad(err)
		}
		return a.eraseUser(ctx, p.UserID, p.At.Time)
	case FollowCreated:
		var p FollowPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return bad(err)
		}
		return a.ifGone(ctx, []string{p.FollowerID, p.FolloweeID}, func() error { return a.removeFollow(ctx, p.FollowerID, p.FolloweeID) })
	case LikeCreated:
		var p LikePayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return bad(err)
		}
		return a.ifGone(ctx, []string{p.UserID}, func() error { return a.removeLike(ctx, p.PostID, p.AuthorID, p.UserID) })
	case CommentCreated:
		var p CommentPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return bad(err)
		}
		return a.ifGone(ctx, []string{p.AuthorID}, func() error {
			return a.eraseItem(ctx, commentKey(p.PostID, p.CommentID), a.eraseComment)
		})
	case PostCreated:
		p, err := a.postPayload(ev)
		if err != nil {
			return bad(err)
		}
		return a.ifGone(ctx, []string{p.AuthorID}, func() error { return a.eraseItem(ctx, postKey(p.PostID), a.erasePost) })
	case NotificationsCreated, NotificationCreated:
		ns, err := notificationsOf(ev)
		if err != nil {
			return bad(err)
		}
		var users []string
		for _, n := range ns {
			users = append(users, n.Actor, n.Recipient)
		}
		gone, err := a.goneUsers(ctx, users...)
		if err != nil {
			return err
		}
		for _, n := range ns {
			if gone[n.Recipient] && n.Type == "mention" {
				if err := a.unmention(ctx, n.Post, n.Recipient); err != nil {
					return err
				}
			}
			if gone[n.Actor] || gone[n.Recipient] {
				if err := a.eraseItem(ctx, notifKey(n.Recipient, n.ID), a.eraseNotification); err != nil {
					return err
				}
			}
		}
		return nil
	case BlockCreated, MuteCreated:
		var p RelationPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return bad(err)
		}
		k := blockKey(p.UserID, p.TargetID)
		if ev.Type == MuteCreated {
			k = muteKey(p.UserID, p.TargetID)
		}
		return a.ifGone(ctx, []string{p.UserID, p.TargetID}, func() error {
			defer a.edgeChange(p.UserID, p.TargetID)()
			return a.table.Delete(ctx, k)
		})
	case ActivityRecorded:
		var p ActivityPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return bad(err)
		}
		return a.ifGone(ctx, []string{p.UserID}, func() error { return a.eraseEngagement(ctx, p.UserID) })
	}
	return nil
}

// ifGone runs erase if any of users is a deleted user.
func (a *App) ifGone(ctx context.Context, users []string, erase func() error) error {
	gone, err := a.goneUsers(ctx, users...)
	if err != nil || len(gone) == 0 {
		return err
	}
	return erase()
}

// eraseItem reads item k and, if it is there, erases it with erase.
func (a *App) eraseItem(ctx context.Context, k table.Key, erase func(context.Context, table.Item) error) error {
	it, err := a.table.Get(ctx, k)
	if rookery.IsKind(err, rookery.NotFound) {
		return nil
	} else if err != nil {
		return err
	}
	return erase(ctx, it)
}

// eraseUser erases what deleted user had, one kind at a time (the table at the top of this file).
// It stops without erasing if the id belongs to a live user again (the tombstone expired and the
// id was taken anew: what is there is theirs).
func (a *App) eraseUser(ctx context.Context, user string, deletedAt time.Time) error {
	if wait := min(a.indexLag, deletedAt.Add(a.indexLag).Sub(a.clock.Now())); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return rookery.E("app.eraseUser", rookery.Unavailable, ctx.Err())
		}
	}
	cur, err := a.table.Get(ctx, userKey(user))
	switch {
	case err == nil && !userGone(cur):
		a.log.Warn("a deleted account's id is in use again; its erasure stops", "user", user)
		return nil
	case err != nil && !rookery.IsKind(err, rookery.NotFound):
		return err
	}
	began := a.clock.Now()
	steps := []struct {
		q     table.Query
		erase func(context.Context, table.Item) error
	}{
		{table.Query{Index: gsi1.Name, PK: postsByAuthorPK(user)}, a.erasePost},
		{table.Query{Index: gsi1.Name, PK: commentsByPK(user)}, a.eraseComment},
		{table.Query{Index: gsi1.Name, PK: likedByPK(user)}, a.eraseLike},
		{followingQuery(user), a.eraseFollow},
		{followersQuery(user), a.eraseFollow},
		{table.Query{Index: gsi1.Name, PK: notifiedByPK(user)}, a.eraseNotification},
		{table.Query{PK: blockKey(user, "").PK}, a.deleteEdge},
		{table.Query{PK: muteKey(user, "").PK}, a.deleteEdge},
		{table.Query{Index: gsi3.Name, PK: blockedByPK(user)}, a.deleteEdge},
		{table.Query{Index: gsi3.Name, PK: mutedByPK(user)}, a.deleteEdge},
		{table.Query{PK: notifPK(user)}, a.eraseReceived},
		{table.Query{PK: streamPK(user)}, a.deleteItem},
	}
	for _, s := range steps {
		if err := a.eraseListed(ctx, s.q, s.erase); err != nil {
			return err
		}
	}
	if err := a.eraseEngagement(ctx, user); err != nil {
		return err
	}
	if err := a.table.Delete(ctx, streamerKey(user)); err != nil {
		return err
	}
	if a.timelines != nil {
		if err := a.timelines.Delete(ctx, user); err != nil {
			return err
		}
	}
	a.log.Info("account erased", "user", user, "took", a.clock.Now().Sub(began).String())
	return nil
}

// eraseListed erases every item q lists with erase, a page at a time. It pages with the cursor
// rather than reading from the start again: an index on DynamoDB may list an item for a moment
// after it is deleted.
func (a *App) eraseListed(ctx context.Context, q table.Query, erase func(context.Context, table.Item) error) error {
	q.Limit = table.MaxQueryLimit
	return table.EachPage(ctx, a.table, q, func(items []table.Item) error {
		for _, it := range items {
			if err := erase(ctx, it); err != nil {
				return err
			}
		}
		return nil
	})
}

// eraseEngagement deletes user's activities, daily points, scores (and so their leaderboard
// entries) and streak record (and its board entry).
func (a *App) eraseEngagement(ctx context.Context, user string) error {
	for _, q := range []table.Query{{PK: actPK(user)}, {PK: scoreKey(user, "", "").PK}} {
		if err := a.eraseListed(ctx, q, a.deleteItem); err != nil {
			return err
		}
	}
	return a.table.Delete(ctx, streakKey(user))
}

// deleteEdge deletes edge item it (a block or mute; absent is a success).
func (a *App) deleteEdge(ctx context.Context, it table.Item) error {
	k := it.Key()
	defer a.edgeChange(edgeFrom(k), edgeTo(k))()
	return a.deleteItem(ctx, it)
}

// deleteItem deletes item it (absent is a success).
func (a *App) deleteItem(ctx context.Context, it table.Item) error {
	return a.table.Delete(ctx, it.Key())
}

// erasePost deletes what others left on a deleted user's post (their likes and comments, in the
// post's partition), then the post as its author would (PostDeleted takes it out of every
// timeline, count and board). In that order: an erasure that dies in between finds the post by
// its author's index again when it is redone, and finishes; the post removed first, nothing would
// lead to what was left on it.
func (a *App) erasePost(ctx context.Context, it table.Item) error {
	post := postKey(it.String("id"))
	err := a.eraseListed(ctx, table.Query{PK: post.PK}, func(ctx context.Context, x table.Item) error {
		if x.Key() == post {
			return nil // the post itself, removed last
		}
		return a.deleteItem(ctx, x)
	})
	if err != nil {
		return err
	}
	return ignoreConflict(a.removePost(ctx, it))
}

func (a *App) eraseComment(ctx context.Context, it table.Item) error {
	owner, err := a.postAuthor(ctx, it.String("post_id"))
	if err != nil {
		return err
	}
	return ignoreConflict(a.removeComment(ctx, owner, it))
}

// eraseLike removes a like with its event, which takes it out of the post's count, its author's
// score and notifications; a like of a post deleted since is deleted alone (the post's deletion
// took it out of everything).
func (a *App) eraseLike(ctx context.Context, it table.Item) error {
	post := it.String("post_id")
	author, err := a.postAuthor(ctx, post)
	if err != nil {
		return err
	}
	if author == "" {
		return a.deleteItem(ctx, it)
	}
	return a.removeLike(ctx, post, author, it.String("user_id"))
}

func (a *App) eraseFollow(ctx context.Context, it table.Item) error {
	return a.removeFollow(ctx, it.String("follower_id"), it.String("followee_id"))
}

// eraseNotification deletes notification item it, and a like's or a follow's reference to it.
func (a *App) eraseNotification(ctx context.Context, it table.Item) error {
	k := it.Key()
	writes := []table.Write{table.DeleteWrite(k)}
	if ref := refOf(it); ref != "" {
		writes = append(writes, table.DeleteWrite(notifRefKey(recipientOf(k), ref)))
	}
	return a.table.TransactWrite(ctx, writes)
}

// eraseReceived deletes notification item it, which a deleted user received; a mention's post
// first stops naming them.
func (a *App) eraseReceived(ctx context.Context, it table.Item) error {
	if it.String("type") == "mention" {
		if err := a.unmention(ctx, it.String("post_id"), recipientOf(it.Key())); err != nil {
			return err
		}
	}
	return a.deleteItem(ctx, it)
}

// unmention takes deleted user out of the mentions of post (reads already show none of them:
// view.show), so that a new account under their id, after the grace period, is not named by it.
// The posts that mention a user are found through the mention notifications they received (the
// account's, and those made after its deletion: ApplyErasure); a mention of a user who blocked
// the author after the post and before its notification was handled made no notification, and
// stays.
func (a *App) unmention(ctx context.Context, post, user string) error {
	k := postKey(post)
	for {
		it, err := a.table.Get(ctx, k)
		if rookery.IsKind(err, rookery.NotFound) {
			return nil
		} else if err != nil {
			return err
		}
		mentions := it.Strings("mentions")
		if !slices.Contains(mentions, user) {
			return nil
		}
		_, err = a.table.Update(ctx, k, table.Update{
			Set: map[string]any{"mentions": nonNil(slices.DeleteFunc(mentions, func(m string) bool { return m == user }))},
			Add: map[string]int64{"rev": 1},
		}, table.VersionIs("rev", it.Int("rev")))
		a.posts.settle(ctx, a.table, post, k, err)
		if !rookery.IsKind(err, rookery.Conflict) {
			return err
		}
		// The post changed meanwhile (an edit, a like counted): read it again.
	}
}

// postAuthor returns the author of post, or "" if it is gone.
func (a *App) postAuthor(ctx context.Context, post string) (string, error) {
	it, err := a.table.Get(ctx, postKey(post))
	if rookery.IsKind(err, rookery.NotFound) {
		return "", nil
	}
	return it.String("author_id"), err
}

// ignoreConflict is err, but nil for a condition that failed because the thing is gone already.
func ignoreConflict(err error) error {
	var ce *table.ConditionError
	if errors.As(err, &ce) || rookery.IsKind(err, rookery.Conflict) {
		return nil
	}
	return err
}
