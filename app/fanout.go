package app

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/timeline"
)

// FanoutGroup and TimelineCleanupGroup are the consumer groups that keep home timelines.
const (
	FanoutGroup          = "fanout"
	TimelineCleanupGroup = "timeline-cleanup"
)

// DefaultCelebrityThreshold: authors with more followers are not fanned out (DESIGN decision 4);
// their posts are merged into feeds at read time.
const DefaultCelebrityThreshold = 10_000

// fanoutPage is how many followers one step of fan-out reads and pushes to (seed 002 §2.5.4).
const fanoutPage = 500

// ApplyFanout is the fan-out consumer's handler: a PostCreated of an author with at most the
// celebrity threshold of followers is pushed, page by page, into every follower's timeline (only
// timelines that exist: a missing one is rebuilt whole on its next read), and, to the readers with
// a stream open, as a feed.post event (a celebrity's post too, to those who follow them). Pushing
// and appending are idempotent, so a redelivery or a restart half-way through repeats pages
// harmlessly.
func (a *App) ApplyFanout(ctx context.Context, ev rookery.Event) error {
	const op rookery.Op = "app.ApplyFanout"
	if ev.Type != PostCreated {
		return nil
	}
	p, err := a.postPayload(ev)
	if err != nil || p.PostID == "" {
		return rookery.E(op, rookery.Invalid, "malformed post event", err)
	}
	entry := timeline.Entry{PostID: p.PostID, AuthorID: p.AuthorID, At: p.CreatedAt.Time}
	a.recent.add(entry) // a post made through another API process
	// An author whose follower list is kept has no more followers than the threshold (longer lists
	// are not kept): the post is pushed without a read. Otherwise the author's count says whether
	// they are a celebrity, read with the post: a post deleted before its fan-out (a lagging one)
	// is then not pushed. A kept author's deleted post is pushed and taken out below, and its
	// stream events are not sent (streamPost reads the post).
	if !a.followers.kept(p.AuthorID) {
		got, err := a.table.BatchGet(ctx, []table.Key{userKey(p.AuthorID), postKey(p.PostID)})
		if err != nil {
			return err
		}
		author := got[0]
		if author == nil || got[1] == nil {
			return nil
		}
		if author.Int("follower_count") > int64(a.celebrityThreshold) {
			if err := a.registerCelebrity(ctx, p.AuthorID); err != nil { // merged at read time
				return err
			}
			return a.streamCelebrityPost(ctx, entry)
		}
	}
	// The author's own timeline holds their posts too. Each page's readers with a stream open get
	// the post's feed.post event, once it is in their timelines.
	var reached []string
	err = a.toAuthorAndFollowers(ctx, p.AuthorID, fanoutPage, func(users []string) error {
		if err := a.timelines.Push(ctx, users, entry); err != nil {
			return err
		}
		if a.log.Enabled(ctx, slog.LevelDebug) {
			reached = append(reached, users...)
		}
		return a.streamPost(ctx, users, entry)
	})
	if err != nil {
		return err
	}
	if a.log.Enabled(ctx, slog.LevelDebug) {
		a.log.Debug("post fanned out", "post", p.PostID, "author", p.AuthorID, "readers", strings.Join(reached, " "))
	}
	// Deleted before or while it was pushed: the deletion's cleanup may have run before the last
	// push, and would not remove it again.
	if _, err := a.table.Get(ctx, postKey(p.PostID)); rookery.IsKind(err, rookery.NotFound) {
		return a.timelines.RemovePost(ctx, p.PostID)
	} else if err != nil {
		return err
	}
	return nil
}

// ApplyTimelineCleanup is the cleanup consumer's handler: what a reader may no longer see leaves
// the stored timelines (the read path hides it already). A deleted post leaves every timeline; an
// unfollow, a block (both ways) or a mute takes the author's entries out of the reader's timeline;
// a follow or an unmute merges the author's recent posts into the reader's timeline. A post turned
// to followers needs nothing: only followers' timelines hold a post (fan-out reaches followers, an
// unfollow takes the author's entries out).
func (a *App) ApplyTimelineCleanup(ctx context.Context, ev rookery.Event) error {
	const op rookery.Op = "app.ApplyTimelineCleanup"
	switch ev.Type {
	case PostDeleted:
		p, err := a.postPayload(ev)
		if err != nil {
			return rookery.E(op, rookery.Invalid, err)
		}
		return a.timelines.RemovePost(ctx, p.PostID)
	case FollowDeleted:
		var p FollowPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return rookery.E(op, rookery.Invalid, err)
		}
		return a.removeAuthor(ctx, p.FollowerID, p.FolloweeID)
	case BlockCreated:
		var p RelationPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return rookery.E(op, rookery.Invalid, err)
		}
		if err := a.removeAuthor(ctx, p.UserID, p.TargetID); err != nil {
			return err
		}
		return a.removeAuthor(ctx, p.TargetID, p.UserID)
	case MuteCreated, MuteDeleted:
		var p RelationPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return rookery.E(op, rookery.Invalid, err)
		}
		if ev.Type == MuteDeleted {
			return a.mergeRecent(ctx, p.UserID, p.TargetID)
		}
		return a.removeAuthor(ctx, p.UserID, p.TargetID)
	case FollowCreated:
		var p FollowPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return rookery.E(op, rookery.Invalid, err)
		}
		return a.mergeRecent(ctx, p.FollowerID, p.FolloweeID)
	}
	return nil
}

// removeAuthor takes author's entries out of reader's timeline, unless reader sees author's posts
// again by now. Events of different keys are handled in any order (a block's, retried after a
// backoff, may come after the unblock and the new follow's merge), so a removal must not trust its
// event to be the latest word on the pair: removing what the reader sees again would leave those
// posts missing above the timeline's floor for good. If the reader came to see the author while it
// removed, the author's recent posts are merged back (the change's own merge may have run first).
func (a *App) removeAuthor(ctx context.Context, reader, author string) error {
	if sees, err := a.sees(ctx, reader, author); err != nil || sees {
		return err
	}
	if err := a.timelines.RemoveAuthor(ctx, reader, author); err != nil {
		return err
	}
	if sees, err := a.sees(ctx, reader, author); err != nil || !sees {
		return err
	}
	return a.mergeRecent(ctx, reader, author)
}

// sees reports whether reader's home feed shows author's posts now: reader follows author and has
// not muted them, and neither blocks the other.
func (a *App) sees(ctx context.Context, reader, author string) (bool, error) {
	got, err := a.table.BatchGet(ctx, []table.Key{followKey(reader, author), muteKey(reader, author), blockKey(reader, author), blockKey(author, reader)})
	if err != nil {
		return false, err
	}
	return got[0] != nil && got[1] == nil && got[2] == nil && got[3] == nil, nil
}

// mergeRecent merges author's recent posts (up to followMerge) into reader's timeline, if it exists
// (complete, or being built: a build whose pull read the follows before this one needs it too) and
// reader sees author, keeping it complete above its floor (timeline.Store): if author has older
// posts too, the floor is first raised to the oldest merged one. Reads below it pull.
//
// What it read may change before it writes: a deletion, an unfollow, a mute or a block handled
// meanwhile (events of other keys run concurrently) may have removed before the merge put back.
// So after the merge it reads again and takes out what the reader may no longer see; a change
// after that read comes after the merge's write, and its own removal finds the entries.
func (a *App) mergeRecent(ctx context.Context, reader, author string) error {
	if sees, err := a.sees(ctx, reader, author); err != nil || !sees {
		return err
	}
	if ok, err := a.timelines.Exists(ctx, reader); err != nil || !ok {
		return err
	}
	entries, more, err := a.queryAuthorPosts(ctx, author, timeline.Entry{}, followMerge)
	if err != nil || len(entries) == 0 {
		return err
	}
	if more {
		if err := a.timelines.DropOlder(ctx, reader, entries[len(entries)-1]); err != nil {
			return err
		}
	}
	if err := a.timelines.Merge(ctx, reader, entries); err != nil {
		return err
	}
	if sees, err := a.sees(ctx, reader, author); err != nil {
		return err
	} else if !sees {
		return a.removeAuthor(ctx, reader, author)
	}
	return a.removeDeleted(ctx, reader, entries)
}

// removeDeleted removes from reader's timeline the entries whose posts are deleted by now.
func (a *App) removeDeleted(ctx context.Context, reader string, entries []timeline.Entry) error {
	keys := make([]table.Key, len(entries))
	for i, e := range entries {
		keys[i] = postKey(e.PostID)
	}
	got, err := a.table.BatchGet(ctx, keys)
	if err != nil {
		return err
	}
	for i, it := range got {
		if it == nil {
			if err := a.timelines.Remove(ctx, reader, entries[i].PostID); err != nil {
				return err
			}
		}
	}
	return nil
}

// eachFollowerPage calls each with author's followers, pages of up to limit: newest first from the
// store, in id order from the kept lists.
func (a *App) eachFollowerPage(ctx context.Context, author string, limit int, each func(users []string) error) error {
	if list, ok := a.followers.get(author); ok {
		for i := 0; i < len(list); i += limit {
			if err := each(list[i:min(len(list), i+limit)]); err != nil {
				return err
			}
		}
		return nil
	}
	fill := a.followers.fill(author)
	q := followersQuery(author)
	q.Limit = limit
	err := table.EachKeyPage(ctx, a.table, q, func(edges []table.Key) error {
		users := make([]string, len(edges))
		for i, k := range edges {
			users[i] = followerOf(k)
		}
		fill.add(users)
		return each(users)
	})
	if err == nil {
		a.followers.keep(fill)
	}
	return err
}
