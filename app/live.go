package app

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"hash/fnv"
	"slices"
	"strconv"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/timeline"
)

// Live streams (GET /v1/stream). Each user who has opened a stream in the last StreamWindow has a
// stream log in the table: a head (the last sequence number given out) and the events after it,
// the newest StreamKeep of them, each kept StreamWindow. The consumers that see what changes a
// user's feed, notifications or streak append events to the logs of the users it concerns that
// have a head (present users); nobody else pays for streams.
//
// Invariants: a log's sequence numbers increase by one per event and an event is committed with
// the head that gives out its number (one transaction, conditional on the head), so a log's events
// become visible in sequence order; an event is appended at most once per source (a dedupe item
// per source id, in the same transaction), so a redelivered event adds nothing. A feed.post's
// source is the post itself, not the event that brought it: a post enters a reader's stream once
// while it stays in their feed, whichever of its ways in (the post's fan-out, a follow, an unmute)
// the consumers handle first or see the effect of (each reads the rules as they are when it runs,
// so a follow's handler may find an unmute that came after it, and the post's fan-out a follow
// made after the post). Taking an author's posts out of a reader's feed forgets those sources
// (forgetShown), so that they can come in again. A client that has
// seen event n of a log resumes exactly after it while n is still in the log (StreamSince); once
// it is gone, the client gets a reset and refetches.
//
// Events are stored as the client gets them, rendered for their reader when they happen (a post by
// the feed's visibility, follow, block and mute rules at that moment): a replay sends exactly what
// a client that never disconnected got, and what changes later comes as an event of its own. A
// feed.post is stored as the post's JSON, in one stream post item for every reader who sees it
// alike (streamPostKey), and its reader's position: it is most of what streams write.

// Stream event types.
const (
	StreamFeedPost     = "feed.post"
	StreamFeedRemove   = "feed.remove"
	StreamFeedUpdate   = "feed.update"
	StreamNotification = "notification"
	StreamStreak       = "streak"
	// StreamReset tells a client that the events after its last id are no longer kept: refetch.
	StreamReset = "reset"
)

// LiveGroup is the consumer group that appends feed and streak events to stream logs.
const LiveGroup = "live"

const (
	// StreamKeep is how many of a user's latest stream events a reconnecting client can resume.
	StreamKeep = 1000
	// StreamWindow is how long a stream event is kept, and how long a user stays present after
	// their last stream was open.
	StreamWindow = 24 * time.Hour
	// streamAttempts bounds the retries of an append that lost its head to a concurrent one.
	streamAttempts = 50
)

// StreamEvent is one event of a user's stream log.
type StreamEvent struct {
	Seq  uint64
	Type string
	Data json.RawMessage
}

// StreamPublisher takes every appended stream event to the streams that are open, on this process
// or others (package live). Publishing may lose an event: an open stream notices the gap at the
// next event or heartbeat and reads the log.
type StreamPublisher interface {
	Publish(user string, seq uint64, typ string, data []byte)
}

// FeedPost is a feed.post event as a client gets it: the post as a feed read shows it, and its
// position (the feed cursor just after it, which orders it among the feed's posts).
type FeedPost struct {
	Post     rookery.Post `json:"post"`
	Position string       `json:"position"`
}

// AppendJSON appends f as encoding/json encodes it (TestFeedPostJSON), without reflection: the live
// consumer encodes one for each present reader of each post.
func (f FeedPost) AppendJSON(b []byte) []byte {
	return append(b, feedPostJSON(f.Post.AppendJSON(nil), f.Position)...)
}

// feedPostJSON is a feed.post event's data (FeedPost) of the post's JSON and its position.
func feedPostJSON(post []byte, position string) []byte {
	b := append(append(make([]byte, 0, len(post)+len(position)+24), `{"post":`...), post...)
	b = rookery.AppendJSONString(append(b, `,"position":`...), position)
	return append(b, '}')
}

// FeedRemove is a feed.remove event: one post left the feed, or all of an author's did.
type FeedRemove struct {
	PostID   string `json:"post_id,omitempty"`
	AuthorID string `json:"author_id,omitempty"`
	// Reason is deleted, unfollowed, blocked or muted.
	Reason string `json:"reason"`
}

// NotificationEvent is a notification event: the new notification and the unread count after it.
type NotificationEvent struct {
	Notification Notification `json:"notification"`
	UnreadCount  int          `json:"unread_count"`
}

// StreamStart is where a stream starts: Events are the ones to send first (after the client's
// last id), then everything after Head as it is appended. Reset says the client's last id is no
// longer in the log: send a reset first.
type StreamStart struct {
	Head   uint64
	Events []StreamEvent
	Reset  bool
}

// OpenStream makes the acting user present (their log exists, for StreamWindow from now) and
// returns where their stream starts: after lastID if given (the SSE Last-Event-ID), else now.
func (a *App) OpenStream(ctx context.Context, lastID string) (StreamStart, error) {
	const op rookery.Op = "app.OpenStream"
	user, err := actingUser(ctx, op)
	if err != nil {
		return StreamStart{}, err
	}
	if a.streams == nil {
		return StreamStart{}, rookery.E(op, rookery.NotFound, "live streams are turned off on this server")
	}
	if err := a.exists(ctx, op, user); err != nil {
		return StreamStart{}, err
	}
	var last uint64
	if lastID != "" {
		if last, err = strconv.ParseUint(lastID, 10, 64); err != nil {
			return StreamStart{}, rookery.E(op, rookery.Invalid, "Last-Event-ID is not an event id of this stream")
		}
	}
	head, made, err := a.touchStream(ctx, user)
	if err != nil {
		return StreamStart{}, err
	}
	if made && a.presenceDelay > 0 {
		// Consumers in other processes learn of the new log within PresenceRefresh: the stream
		// begins once they have, so that everything from its beginning reaches it.
		if !rookery.Sleep(ctx, a.presenceDelay) {
			return StreamStart{}, rookery.E(op, rookery.Unavailable, ctx.Err())
		}
		if head, err = a.StreamHead(ctx, user); err != nil {
			return StreamStart{}, err
		}
	}
	start := StreamStart{Head: head}
	if lastID == "" || last == head {
		return start, nil
	}
	evs, ok, err := a.StreamSince(ctx, user, last, head)
	if err != nil {
		return StreamStart{}, err
	}
	start.Events, start.Reset = evs, !ok
	return start, nil
}

// touchStream creates user's stream head if it is missing (numbering from the clock, so that a
// log made again after the old one expired never reuses an id) and keeps it, and the user's entry
// in the registry of present users, for StreamWindow from now. It returns the head, and whether it
// was made now.
func (a *App) touchStream(ctx context.Context, user string) (head uint64, made bool, err error) {
	now := a.clock.Now()
	k := streamHeadKey(user)
	expires := now.Add(StreamWindow).Unix()
	rk := streamerKey(user)
	registry := table.PutWrite(table.Item{table.PK: rk.PK, table.SK: rk.SK, table.TTL: expires})
	it, err := a.table.Get(ctx, k)
	switch {
	case err == nil:
		seq := it.Int("seq")
		err = a.table.TransactWrite(ctx, []table.Write{
			table.UpdateWrite(k, table.Update{Set: map[string]any{table.TTL: expires}}, table.Exists(table.PK)),
			registry,
		})
		if rookery.IsKind(err, rookery.Conflict) {
			return a.touchStream(ctx, user) // expired a moment ago
		}
		return uint64(seq), false, err
	case !rookery.IsKind(err, rookery.NotFound):
		return 0, false, err
	}
	seq := uint64(now.UnixMilli()) * 1000
	err = a.table.TransactWrite(ctx, []table.Write{
		table.PutWrite(table.Item{table.PK: k.PK, table.SK: k.SK, "seq": int64(seq), "base": int64(seq), table.TTL: expires}, table.NotExists(table.PK)),
		registry,
	})
	if rookery.IsKind(err, rookery.Conflict) {
		return a.touchStream(ctx, user) // made by another stream a moment ago
	}
	if err == nil {
		a.present.forget() // this process's consumers know at once
	}
	return seq, err == nil, err
}

// PresenceRefresh is how often a process reads the registry of present users again: a consumer in
// another process knows of a user who just became present at most this long after.
const PresenceRefresh = time.Second

// presentUsers returns the users among users that are present (whose streams have a log), as the
// registry said at most PresenceRefresh ago: the consumers check every reader of every post, and
// a read per reader would cost more than the streams. With streams off, nobody is.
func (a *App) presentUsers(ctx context.Context, users []string) ([]string, error) {
	reg, err := a.registry(ctx)
	if err != nil {
		return nil, err
	}
	var present []string
	for _, u := range users {
		if reg[u] {
			present = append(present, u)
		}
	}
	return present, nil
}

// registry returns the present users, read at most PresenceRefresh ago.
func (a *App) registry(ctx context.Context) (map[string]bool, error) {
	if a.streams == nil {
		return nil, nil
	}
	return a.present.get(a.clock.Now(), PresenceRefresh, func() (map[string]bool, error) {
		reg := map[string]bool{}
		q := streamersQuery()
		q.Limit = table.MaxQueryLimit
		q.KeysOnly = true
		err := table.EachKeyPage(ctx, a.table, q, func(keys []table.Key) error {
			for _, k := range keys {
				reg[streamerOf(k)] = true
			}
			return nil
		})
		return reg, err
	})
}

// streamCelebrityPost appends the feed.post event of a celebrity's post (one fan-out skips) to the
// logs of the present users who follow the celebrity: fewer, as a rule, than their followers.
func (a *App) streamCelebrityPost(ctx context.Context, entry timeline.Entry) error {
	reg, err := a.registry(ctx)
	if err != nil || len(reg) == 0 {
		return err
	}
	readers := make([]string, 0, len(reg))
	for u := range reg {
		readers = append(readers, u)
	}
	slices.Sort(readers)
	return a.streamPost(ctx, readers, entry) // who does not follow them is not shown it
}

// StreamHead returns the last sequence number of user's stream log (0 if it has none).
func (a *App) StreamHead(ctx context.Context, user string) (uint64, error) {
	it, err := a.table.Get(ctx, streamHeadKey(user))
	if rookery.IsKind(err, rookery.NotFound) {
		return 0, nil
	}
	return uint64(it.Int("seq")), err
}

// StreamSince returns the events of user's log after seq after, up to and including upTo (0: up to
// the head), oldest first. ok is false if the events after after are no longer all kept (after
// is older than the log's oldest event, or not of this log at all): the client must refetch.
func (a *App) StreamSince(ctx context.Context, user string, after, upTo uint64) (evs []StreamEvent, ok bool, err error) {
	head, err := a.table.Get(ctx, streamHeadKey(user))
	if rookery.IsKind(err, rookery.NotFound) {
		return nil, false, nil
	} else if err != nil {
		return nil, false, err
	}
	base, last := uint64(head.Int("base")), uint64(head.Int("seq"))
	switch {
	case after == last:
		return nil, true, nil
	case after < base || after > last:
		return nil, false, nil
	}
	if upTo == 0 || upTo > last {
		upTo = last
	}
	// The log holds after itself, or after is its base (the number it began at, which no event has):
	// then it holds after+1. Either way the first item read says whether anything was trimmed.
	q := streamEventsQuery(user, after, upTo)
	q.Limit = table.MaxQueryLimit
	first := true
	var posts []storedPost
	err = table.EachPage(ctx, a.table, q, func(items []table.Item) error {
		for _, it := range items {
			seq := uint64(it.Int("seq"))
			if first {
				first = false
				if seq == after {
					continue
				}
				if after != base || seq != base+1 {
					return errStreamGap
				}
			}
			ev := StreamEvent{Seq: seq, Type: it.String("type"), Data: it.Bytes("data")}
			if post := it.String("post"); post != "" {
				posts = append(posts, storedPost{at: len(evs), key: table.Key{PK: streamPostPK(it.String("post_id")), SK: post}, position: it.String("position")})
			}
			evs = append(evs, ev)
		}
		return nil
	})
	if err == nil && len(posts) > 0 {
		err = a.loadStoredPosts(ctx, evs, posts)
	}
	if errors.Is(err, errStreamGap) || err == nil && first {
		return nil, false, nil // trimmed (or expired) past after
	}
	return evs, err == nil, err
}

// storedPost is a feed.post event of a log stored as its stream post item (key) and position.
type storedPost struct {
	at       int // the event's index among those read
	key      table.Key
	position string
}

// loadStoredPosts sets the data of the feed.post events posts of evs from their stream post items;
// errStreamGap if one is no longer kept (it is kept longer than the events that refer to it).
func (a *App) loadStoredPosts(ctx context.Context, evs []StreamEvent, posts []storedPost) error {
	for chunk := range slices.Chunk(posts, table.MaxBatchGet) {
		keys := make([]table.Key, len(chunk))
		for i, p := range chunk {
			keys[i] = p.key
		}
		items, err := a.table.BatchGet(ctx, keys)
		if err != nil {
			return err
		}
		for i, p := range chunk {
			if items[i] == nil {
				return errStreamGap
			}
			evs[p.at].Data = feedPostJSON(items[i].Bytes("post"), p.position)
		}
	}
	return nil
}

var errStreamGap = errors.New("the client's last event is no longer kept")

// appendStream appends an event of type typ with data to the log of each present user among
// users, once per source src (an event id, with a suffix when one event causes several), and
// publishes it.
func (a *App) appendStream(ctx context.Context, users []string, src, typ string, data any) error {
	if len(users) == 0 {
		return nil
	}
	present, err := a.presentUsers(ctx, users)
	if err != nil || len(present) == 0 {
		return err
	}
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	appends := make([]streamAppend, len(present))
	for i, u := range present {
		appends[i] = streamAppend{user: u, data: b}
	}
	return a.appendBatch(ctx, src, typ, appends)
}

// streamAppend is one user's event of an appendBatch: data as the client gets it; for a feed.post,
// also the stream post item it is stored as (streamPostKey(postID, ...).SK = post), whose post and
// position are data (feedPostJSON): a post is stored once for all its readers, not once each.
type streamAppend struct {
	user                   string
	data                   []byte
	postID, post, position string
}

// streamBatch is how many users' appends one transaction holds (four writes each).
const streamBatch = table.MaxTransact / 4

// appendShards is how many appenders a process runs; a user's appends always go to the same one.
const appendShards = 8

// appendReq is one append waiting for its appender.
type appendReq struct {
	streamAppend
	src, typ string
	done     chan error
}

// appendBatch appends an event of one source to the log of each of appends' users and returns
// once every append is durable.
//
// The appends of a process go through its appenders, a user's always through the same one, which
// commit what has gathered while their last transaction was syncing in one transaction (up to
// streamBatch users): one synced write for many appends, and no two appends of this process race
// for a head. (Another process's may: then the conditions fail and the users are done one at a
// time.)
func (a *App) appendBatch(ctx context.Context, src, typ string, appends []streamAppend) error {
	a.appendersOnce.Do(func() {
		a.appenders = make([]chan appendReq, appendShards)
		for i := range a.appenders {
			a.appenders[i] = make(chan appendReq, 1024)
			p := &appender{a: a}
			if a.soleWriter {
				p.heads = map[string]streamHead{}
			}
			go p.run(a.appenders[i])
		}
	})
	done := make(chan error, len(appends))
	for _, e := range appends {
		a.appenders[shardOf(e.user)] <- appendReq{streamAppend: e, src: src, typ: typ, done: done}
	}
	var first error
	for range appends {
		if err := <-done; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func shardOf(user string) int {
	h := fnv.New32a()
	h.Write([]byte(user))
	return int(h.Sum32() % appendShards)
}

// appender commits the appends of the users of one shard (one goroutine). For a SoleWriter it
// keeps the heads it wrote, so a gathering reads only the heads it does not know: no other
// process appends, and no other appender appends to its users. A head kept can still be stale (a
// stream made the log afresh after it expired): the head's condition fails then, and the heads
// of that gathering are read again.
type appender struct {
	a     *App
	heads map[string]streamHead // nil: not kept (other processes append too)
}

// streamHead is a log's head: the last number given out, and the one the log began at.
type streamHead struct{ seq, base int64 }

// keptHeads bounds the heads an appender keeps (about 100 bytes each); past it they are dropped
// and read again.
const keptHeads = 50_000

// run commits the appends that reach it, a gathering at a time.
func (p *appender) run(in chan appendReq) {
	var carried *appendReq // the next gathering's first: its user was in the last one already
	for {
		var batch []appendReq
		if carried != nil {
			batch, carried = append(batch, *carried), nil
		} else {
			batch = append(batch, <-in)
		}
		users := map[string]bool{batch[0].user: true}
	gather:
		for len(batch) < streamBatch {
			select {
			case r := <-in:
				if users[r.user] {
					carried = &r
					break gather
				}
				users[r.user] = true
				batch = append(batch, r)
			default:
				break gather
			}
		}
		err := p.commit(context.Background(), batch)
		for _, r := range batch {
			r.done <- err
		}
	}
}

// commit appends each of batch (one per user) in one transaction; if its conditions fail (another
// process's append took a number, a redelivery, a head that expired), one user at a time.
func (p *appender) commit(ctx context.Context, batch []appendReq) error {
	err := p.try(ctx, batch)
	if !errors.As(err, new(*table.ConditionError)) {
		return err
	}
	for _, r := range batch {
		if err := p.one(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// try makes one attempt at appending each of batch (one per user) in one transaction, and
// publishes them if it commits. If it fails, the heads of batch are forgotten.
func (p *appender) try(ctx context.Context, batch []appendReq) error {
	heads, err := p.headsOf(ctx, batch)
	if err != nil {
		return err
	}
	var writes []table.Write
	var published []func()
	for i, r := range batch {
		if heads[i] == nil {
			continue // the user left StreamWindow ago
		}
		ws, seq := p.a.appendWrites(r, *heads[i])
		writes = append(writes, ws...)
		published = append(published, func() { p.a.publish(r.user, seq, r.typ, r.data) })
		heads[i].seq = seq
	}
	if len(writes) == 0 {
		return nil
	}
	if err := p.a.streamTable.TransactWrite(ctx, writes); err != nil {
		if p.heads != nil {
			for _, r := range batch {
				delete(p.heads, r.user)
			}
		}
		return err
	}
	if p.heads != nil {
		if len(p.heads)+len(batch) > keptHeads {
			clear(p.heads)
		}
		for i, r := range batch {
			if heads[i] != nil {
				p.heads[r.user] = *heads[i]
			}
		}
	}
	for _, pub := range published {
		pub()
	}
	return nil
}

// headsOf returns the heads of batch's users' logs (nil: no log), read unless kept.
func (p *appender) headsOf(ctx context.Context, batch []appendReq) ([]*streamHead, error) {
	heads := make([]*streamHead, len(batch))
	var keys []table.Key
	var at []int
	for i, r := range batch {
		if h, ok := p.heads[r.user]; ok {
			heads[i] = &h
			continue
		}
		keys, at = append(keys, streamHeadKey(r.user)), append(at, i)
	}
	if len(keys) == 0 {
		return heads, nil
	}
	items, err := p.a.streamTable.BatchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	for j, it := range items {
		if it != nil {
			heads[at[j]] = &streamHead{seq: it.Int("seq"), base: it.Int("base")}
		}
	}
	return heads, nil
}

// appendWrites are the writes that append an event to user's log whose head is h: the head takes
// the next number (if it is still at h.seq), the source is marked (if it was not), the event is
// put and the one StreamKeep before it goes (if the log has one: a delete of nothing costs a
// write, and a tombstone to compact, on every backend).
func (a *App) appendWrites(r appendReq, h streamHead) ([]table.Write, int64) {
	user, next := r.user, h.seq+1
	expires := a.clock.Now().Add(StreamWindow).Unix()
	ek, dk := streamEventKey(user, uint64(next)), streamDedupeKey(user, r.src)
	ev := table.Item{table.PK: ek.PK, table.SK: ek.SK, "seq": next, "type": r.typ, table.TTL: expires}
	if r.post != "" {
		ev["post_id"], ev["post"], ev["position"] = r.postID, r.post, r.position
	} else {
		ev["data"] = r.data
	}
	ws := []table.Write{
		table.UpdateWrite(streamHeadKey(user), table.Update{Set: map[string]any{"seq": next}}, table.Compare("seq", table.OpEq, h.seq)),
		table.PutWrite(table.Item{table.PK: dk.PK, table.SK: dk.SK, table.TTL: expires}, table.NotExists(table.PK)),
		// No item is at the event's key: its number is the head's next, which the head's condition
		// keeps for this write. So the backend need not read it first.
		table.ImmutablePutWrite(ev),
	}
	if old := next - StreamKeep; old > h.base {
		ws = append(ws, table.DeleteWrite(streamEventKey(user, uint64(old))))
	}
	return ws, next
}

func (a *App) publish(user string, seq int64, typ string, data []byte) {
	if a.streams != nil {
		a.streams.Publish(user, uint64(seq), typ, data)
	}
}

// one appends r alone, reading its head again as long as another append takes the number.
func (p *appender) one(ctx context.Context, r appendReq) error {
	for range streamAttempts {
		err := p.try(ctx, []appendReq{r})
		var ce *table.ConditionError
		switch {
		case errors.As(err, &ce) && ce.Index == 1:
			return nil // appended before, by an earlier delivery
		case errors.As(err, &ce):
			continue // another append took the number, or the head expired: read it again
		default:
			return err
		}
	}
	return rookery.E("app.appendStream", rookery.Unavailable, "the stream log of "+r.user+" is being appended by many writers")
}

// streamPost appends a feed.post event of the post entry refers to, as each reader may see it now
// (the feed's visibility, follow, block and mute rules), to the logs of the present users among
// readers; a reader who may not see it gets nothing, and one whose stream has it already (since
// the author's posts last left their feed) nothing more. The event is the post as a feed read
// shows it at this moment: a replay sends the same, and what changes later comes as its own event.
func (a *App) streamPost(ctx context.Context, readers []string, entry timeline.Entry) error {
	var appends []streamAppend
	stored := map[string]bool{} // the stream post items written
	err := a.eachFeedView(ctx, readers, entry, func(reader string, post []byte) error {
		k := streamPostKey(entry.PostID, post)
		if !stored[k.SK] {
			// Before the events that refer to it, and kept longer than they are.
			it := table.Item{table.PK: k.PK, table.SK: k.SK, "post": post, table.TTL: a.clock.Now().Add(StreamWindow + time.Hour).Unix()}
			if err := a.streamTable.Put(ctx, it); err != nil {
				return err
			}
			stored[k.SK] = true
		}
		position := a.feedCursor(reader, entry)
		appends = append(appends, streamAppend{user: reader, data: feedPostJSON(post, position), postID: entry.PostID, post: k.SK, position: position})
		return nil
	})
	if err != nil {
		return err
	}
	return a.appendBatch(ctx, shownSource(entry.AuthorID, entry.PostID), StreamFeedPost, appends)
}

// eachFeedView calls f for each present user among readers whose feed holds the post entry refers
// to now, with the post's JSON as a feed read shows it to them (the feed's visibility, follow,
// block and mute rules; their own liked_by_me). The post's body is encoded once for all of them.
func (a *App) eachFeedView(ctx context.Context, readers []string, entry timeline.Entry, f func(reader string, post []byte) error) error {
	present, err := a.presentUsers(ctx, readers)
	if err != nil || len(present) == 0 {
		return err
	}
	views, err := a.loadViews(ctx, present, []string{entry.AuthorID}, []string{entry.PostID}, nil, true)
	if err != nil {
		return err
	}
	body := rookery.NewPostBodies(1)
	for _, reader := range present {
		if p, ok := views[reader].inFeed(entry); ok {
			if err := f(reader, body.AppendJSON(nil, p)); err != nil {
				return err
			}
		}
	}
	return nil
}

// streamEdit appends a feed.update event of an edited post (event src) to the logs of the present
// users among readers whose feed it is in now, as each may see it now. The event may come before
// the post's feed.post (fan-out is another group), which then shows the edit already; a client
// that does not show the post passes it over. The caller has set the post's copy (ApplyLive).
func (a *App) streamEdit(ctx context.Context, src string, readers []string, entry timeline.Entry) error {
	var appends []streamAppend
	err := a.eachFeedView(ctx, readers, entry, func(reader string, post []byte) error {
		data := append(append(make([]byte, 0, len(post)+10), `{"post":`...), post...)
		appends = append(appends, streamAppend{user: reader, data: append(data, '}')})
		return nil
	})
	if err != nil {
		return err
	}
	return a.appendBatch(ctx, src, StreamFeedUpdate, appends)
}

// shownSource is the source of the feed.post events of an author's post: the post, so that it is
// appended once however many ways it comes in. A feed.post's source starts with "S#", which no
// event id does; shownPrefix(author) starts every one of the author's posts.
func shownSource(author, post string) string { return shownPrefix(author) + post }

func shownPrefix(author string) string { return "S#" + author + "#" }

// forgetShown forgets which of author's posts reader's stream was given (the sources of their
// feed.post events), once they have left reader's feed: when they come in again, they are sent
// again. A reader with no log has nothing to forget.
func (a *App) forgetShown(ctx context.Context, reader, author string) error {
	k := streamDedupeKey(reader, shownPrefix(author))
	q := table.Query{PK: k.PK, SK: table.SKCond{Op: table.SKBeginsWith, Value: k.SK}, Limit: table.MaxQueryLimit}
	return table.EachKeyPage(ctx, a.streamTable, q, func(keys []table.Key) error {
		for _, k := range keys {
			if err := a.streamTable.Delete(ctx, k); err != nil {
				return err
			}
		}
		return nil
	})
}

// ApplyLive is the live consumer's handler: it appends the feed and streak events of an event to
// the stream logs of the present users it concerns. A post enters the feeds of its author and
// every follower (celebrities' too: the read path merges theirs): fan-out appends those, as it
// reads the followers anyway, and this handler only where there is no fan-out. An edited post is
// sent again to the feeds it is in (feed.update); a deleted post leaves them; an unfollow, a block
// (both ways) or a mute takes an author's posts out of a feed, and a follow or an unmute brings
// the author's recent posts in (as the timelines merge them). Notifications are appended by the
// notifications consumer, which alone knows which it created.
func (a *App) ApplyLive(ctx context.Context, ev rookery.Event) error {
	const op rookery.Op = "app.ApplyLive"
	switch ev.Type {
	case PostCreated, PostDeleted:
		if ev.Type == PostCreated && a.timelines != nil {
			return nil // fan-out appends them, as it reads the followers anyway (ApplyFanout)
		}
		p, err := a.postPayload(ev)
		if err != nil || p.PostID == "" {
			return rookery.E(op, rookery.Invalid, "malformed post event", err)
		}
		if ev.Type == PostCreated {
			entry := timeline.Entry{PostID: p.PostID, AuthorID: p.AuthorID, At: p.CreatedAt.Time}
			return a.toAuthorAndFollowers(ctx, p.AuthorID, table.MaxQueryLimit, func(users []string) error { return a.streamPost(ctx, users, entry) })
		}
		remove := FeedRemove{PostID: p.PostID, Reason: "deleted"}
		return a.toAuthorAndFollowers(ctx, p.AuthorID, table.MaxQueryLimit, func(users []string) error {
			return a.appendStream(ctx, users, ev.ID, StreamFeedRemove, remove)
		})
	case PostEdited:
		p, err := a.postPayload(ev)
		if err != nil || p.PostID == "" {
			return rookery.E(op, rookery.Invalid, "malformed post event", err)
		}
		// The post is read back, and its copy set, once for every page of readers: the event may be
		// handled before the edit's writer set the copy after its commit (copies), and the views
		// read the copy.
		it, err := a.table.Get(ctx, postKey(p.PostID))
		if rookery.IsKind(err, rookery.NotFound) {
			return nil // deleted since: its feed.remove follows
		} else if err != nil {
			return err
		}
		a.posts.fill(ctx, it)
		entry := timeline.Entry{PostID: p.PostID, AuthorID: p.AuthorID, At: p.CreatedAt.Time}
		return a.toAuthorAndFollowers(ctx, p.AuthorID, table.MaxQueryLimit, func(users []string) error { return a.streamEdit(ctx, ev.ID, users, entry) })
	case FollowDeleted:
		var p FollowPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return rookery.E(op, rookery.Invalid, err)
		}
		return a.streamAuthorLeft(ctx, ev.ID, p.FollowerID, p.FolloweeID, "unfollowed")
	case BlockCreated:
		var p RelationPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return rookery.E(op, rookery.Invalid, err)
		}
		if err := a.streamAuthorLeft(ctx, ev.ID, p.UserID, p.TargetID, "blocked"); err != nil {
			return err
		}
		return a.streamAuthorLeft(ctx, ev.ID, p.TargetID, p.UserID, "blocked")
	case MuteCreated:
		var p RelationPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return rookery.E(op, rookery.Invalid, err)
		}
		return a.streamAuthorLeft(ctx, ev.ID, p.UserID, p.TargetID, "muted")
	case FollowCreated, MuteDeleted:
		var reader, author string
		if ev.Type == FollowCreated {
			var p FollowPayload
			if err := json.Unmarshal(ev.Payload, &p); err != nil {
				return rookery.E(op, rookery.Invalid, err)
			}
			reader, author = p.FollowerID, p.FolloweeID
		} else {
			var p RelationPayload
			if err := json.Unmarshal(ev.Payload, &p); err != nil {
				return rookery.E(op, rookery.Invalid, err)
			}
			reader, author = p.UserID, p.TargetID
		}
		return a.streamRecent(ctx, reader, author)
	case ActivityRecorded:
		var p ActivityPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return rookery.E(op, rookery.Invalid, err)
		}
		present, err := a.presentUsers(ctx, []string{p.UserID})
		if err != nil || len(present) == 0 {
			return err // nobody to tell: the streak is not read
		}
		rec, err := a.loadStreak(ctx, op, p.UserID, false)
		if err != nil {
			return err
		}
		b, err := json.Marshal(rec.view(a.clock.Now()))
		if err != nil {
			return err
		}
		return a.appendBatch(ctx, ev.ID, StreamStreak, []streamAppend{{user: present[0], data: b}})
	}
	return nil
}

// toAuthorAndFollowers calls each with author and their followers, up to limit followers a time,
// the author in the first call, once its followers were read: a user who follows the author after
// the author's event was appended is not reached by the event (as a client that saw the event and
// then followed expects).
func (a *App) toAuthorAndFollowers(ctx context.Context, author string, limit int, each func(users []string) error) error {
	first := true
	err := a.eachFollowerPage(ctx, author, limit, func(users []string) error {
		if first {
			first = false
			users = append([]string{author}, users...)
		}
		return each(users)
	})
	if err == nil && first {
		return each([]string{author}) // no followers
	}
	return err
}

// streamAuthorLeft forgets which of author's posts reader's log was given, then appends the
// feed.remove event (of source src) that takes them out of reader's feed, for reason. In that
// order: whatever brings them back after a client has seen the removal is sent again. A removal
// appended before (a redelivery, maybe after what brought the posts back) forgets nothing.
func (a *App) streamAuthorLeft(ctx context.Context, src, reader, author, reason string) error {
	present, err := a.presentUsers(ctx, []string{reader})
	if err != nil || len(present) == 0 {
		return err
	}
	if _, err := a.streamTable.Get(ctx, streamDedupeKey(reader, src)); err == nil {
		return nil
	} else if !rookery.IsKind(err, rookery.NotFound) {
		return err
	}
	if err := a.forgetShown(ctx, reader, author); err != nil {
		return err
	}
	return a.appendStream(ctx, present, src, StreamFeedRemove, FeedRemove{AuthorID: author, Reason: reason})
}

// streamRecent appends a feed.post event for each of author's recent posts (those a follow merges
// into a timeline) to reader's log, if reader is present.
func (a *App) streamRecent(ctx context.Context, reader, author string) error {
	present, err := a.presentUsers(ctx, []string{reader})
	if err != nil || len(present) == 0 {
		return err
	}
	entries, _, err := a.queryAuthorPosts(ctx, author, timeline.Entry{}, followMerge)
	if err != nil {
		return err
	}
	// Oldest first, so that a client inserting them one by one keeps its feed in order.
	for i := len(entries) - 1; i >= 0; i-- {
		if err := a.streamPost(ctx, present, entries[i]); err != nil {
			return err
		}
	}
	return nil
}

// StreamTicketTTL is how long a stream ticket can be redeemed.
const StreamTicketTTL = time.Minute

// StreamTicket is a short-lived, single-use credential for opening the acting user's stream where
// a client cannot send an Authorization header (a browser's EventSource).
type StreamTicket struct {
	Ticket    string       `json:"ticket"`
	ExpiresAt rookery.Time `json:"expires_at"`
}

// NewStreamTicket issues a stream ticket for the acting user. The stream it opens ends when the
// token that asked for it expires.
func (a *App) NewStreamTicket(ctx context.Context) (StreamTicket, error) {
	const op rookery.Op = "app.NewStreamTicket"
	c, err := caller(ctx, op)
	if err != nil {
		return StreamTicket{}, err
	}
	user, err := actingUser(ctx, op)
	if err != nil {
		return StreamTicket{}, err
	}
	if err := a.exists(ctx, op, user); err != nil {
		return StreamTicket{}, err
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return StreamTicket{}, rookery.E(op, rookery.Internal, err)
	}
	id := base64.RawURLEncoding.EncodeToString(b)
	now := a.clock.Now()
	expires := now.Add(StreamTicketTTL)
	k := ticketKey(id)
	item := table.Item{table.PK: k.PK, table.SK: k.SK, "user_id": user, table.TTL: expires.Unix()}
	if !c.Expires.IsZero() {
		item["token_expires"] = c.Expires.UnixMilli()
	}
	if err := a.table.Put(ctx, item, table.NotExists(table.PK)); err != nil {
		return StreamTicket{}, err
	}
	return StreamTicket{Ticket: id, ExpiresAt: rookery.Time{Time: expires.UTC().Truncate(time.Second)}}, nil
}

// RedeemStreamTicket consumes a stream ticket (once: a second redemption fails) and returns the
// caller it stands for.
func (a *App) RedeemStreamTicket(ctx context.Context, ticket string) (rookery.Caller, error) {
	const op rookery.Op = "app.RedeemStreamTicket"
	refused := rookery.E(op, rookery.Unauthenticated, "the stream ticket is unknown, used or expired")
	if !idOf(ticket, 64, "-_") {
		return rookery.Caller{}, refused
	}
	k := ticketKey(ticket)
	it, err := a.table.Get(ctx, k)
	if rookery.IsKind(err, rookery.NotFound) {
		return rookery.Caller{}, refused
	} else if err != nil {
		return rookery.Caller{}, err
	}
	// Deleting it is the redemption: of two at once, one deletes it and the other finds it gone.
	if err := a.table.Delete(ctx, k, table.Exists(table.PK)); rookery.IsKind(err, rookery.Conflict) {
		return rookery.Caller{}, refused
	} else if err != nil {
		return rookery.Caller{}, err
	}
	c := rookery.Caller{UserID: it.String("user_id")}
	if ms := it.Int("token_expires"); ms != 0 {
		c.Expires = time.UnixMilli(ms)
	}
	if !c.Expires.IsZero() && !c.Expires.After(a.clock.Now()) {
		return rookery.Caller{}, refused
	}
	return c, nil
}
