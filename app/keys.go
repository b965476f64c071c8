package app

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/rookery/rookery/streak"
	"github.com/rookery/rookery/table"
)

// The key schema: every item Rookery stores, its keys, and the one Get or Query that serves each
// access pattern. This file is the only place that spells a key. Separators: '#' joins key parts;
// ids that reach a key are validated first, so none contains a '#'.
//
//	entity          PK                     SK          attributes (besides the keys)
//	User            USER#<id>              META        id, username, display_name, bio, timezone,
//	                                                   created_at, version, *_count
//	Deleted user    USER#<id>              META        id, username, deleted_at, version, ttl (the
//	                                                   tombstone, kept for the grace period: erasure.go)
//	Username claim  USERNAME#<lower>       META        user_id; deleted_at, ttl once its user is deleted
//	                                                   (unique usernames: conditional put)
//	Follow edge     FOLLOW#<follower>      <followee>  follower_id, followee_id, followed_at;
//	                                                   GSI1 FOLLOWING#<follower> / <ts>#<followee>
//	                                                   GSI3 FOLLOWEE#<followee> / <ts>#FOLLOWER#<follower>
//	Post            POST#<id>              META        id, author_id, text, tags, given_tags, mentions,
//	                                                   media, visibility, created_at, edited_at, *_count;
//	                                                   GSI1 USER#<author> / <ts>#POST#<id>
//	Deleted post    POST#<id>              GONE        post_id (kept: a deleted post keeps the likes and
//	                                                   comments others left on it, so its id is never used again)
//	Post tag        POST#<id>              TAG#<tag>   post_id, author_id;
//	                                                   GSI2 TAG#<tag> / <ts>#POST#<id>
//	Like            POST#<id>              LIKE#<user> post_id, user_id, liked_at;
//	                                                   GSI3 LIKES#<post> / <ts>#<user>
//	Block           BLOCK#<blocker>        <blocked>   blocked_at; GSI3 BLOCKED#<blocked> / <blocker>
//	Mute            MUTE#<muter>           <muted>     muted_at; GSI3 MUTED#<muted> / <muter>
//	Comment         POST#<id>              COMMENT#<c> id, post_id, author_id, text, created_at
//	Notification    NOTIF#<user>           N#<event id> id, type, actor_id, post_id, comment_id,
//	                                                   created_at, read; while unread
//	                                                   GSI2 UNREAD#<user> / <event id>;
//	                                                   GSI1 NOTIFBY#<actor> / <ts>#<user>#<id>
//	Notification ref NOTIF#<user>          REF#like:<post>:<liker>, REF#follow:<follower>
//	                                                   sk, at (of the like's or follow's notification)
//	Idempotency key IDEM#<caller>#<sha256>  -          body_hash, status, response, state, ttl (25 h)
//	Applied event   APPLIED#<group>#<id>   -           ttl  (a consumer applied event id; 7 days)
//	Outbox item     OUTBOX#<shard>         <event id>  event  (package events owns these keys)
//	Celebrity       CELEBRITIES            <author>    (fan-out skipped a post of author: merged at read)
//	Streak record   STREAK#<user>          META        user_id, record (JSON: streak state, zone and
//	                                                   its recent changes, points), version;
//	                                                   GSI2 TOPSTREAKS#<shard> / <streak 9>#<user>
//	Activity claim  ACTKEY#<user>#<sha256> -           activity_id, points, ttl (90 days) (a client's
//	                                                   key; an event's activity has the event's id)
//	Activity        ACT#<user>             EV#<ts>#<id> type, source, points, occurred_at, ttl (90 d)
//	Daily activity  ACT#<user>             DAY#<date>  date, points, events, streak_day (kept)
//	Author score    SCORE#<author>         <period>#<key> posts, likes, score, version;
//	                                                   GSI2 TOPAUTHORS#<period>#<key> / <score 12>#<author>
//	Board post      LBPOST#<post>          POST        author_id, created_at, deleted
//	Board like      LBPOST#<post>          LIKE#<user> at (a like the author board counted)
//	Board tally     LBPOST#<post>          LIKES#<date> count (likes counted per day)
//	Stream head     STREAM#<user>          HEAD        seq (the last id given out), base (the first seq,
//	                                                   which no event has), ttl (StreamWindow after
//	                                                   the user's stream was last open: present users)
//	Stream event    STREAM#<user>          E#<seq 20>  seq, type, ttl (StreamWindow), and data, or for
//	                                                   a feed.post post_id, post, position: its data is
//	                                                   {"post": <SPOST#<post_id>, <post>'s post>,
//	                                                   "position": <position>}
//	Stream post     SPOST#<post>           <sha256 16> post (the post's JSON as a feed.post shows it;
//	                                                   the hash is of it: one item for every reader
//	                                                   who sees it alike), ttl (StreamWindow + 1 h)
//	Stream dedupe   STREAM#<user>          D#<source>  ttl (an event's source appended it already)
//	Present user    STREAMERS              <user>      ttl (as the user's stream head's: the registry the
//	                                                   consumers read every second)
//	Stream ticket   TICKET#<id>            -           user_id, expires (of the token), ttl (a minute)
//	Webhook endpoint WEBHOOKS              <id>        id, url, events, description, enabled, secret,
//	                                                   prev_secret, prev_until, created_at
//	Webhook delivery WHQ#<endpoint>        <due 13>#<msg> msg_id, type, body, attempts, queued_at, lease,
//	                                                   last_error (the endpoint's queue, due first)
//	Webhook marker  WHMSG#<endpoint>       <msg id>    ttl (7 days: the message was queued)
//	Timeline marker FEED#<user>            ~           ttl (timeline/tablestore owns the FEED keys)
//	Timeline entry  FEED#<user>            <ts>#<post> post_id, author_id, at, ttl;
//	                                                   GSI4 POST#<post> / FEED#<user>
//
//	access pattern                      served by
//	FEED-001 get user by id             Get(USER#<id>, META)
//	get user by username                Get(USERNAME#<lower>, META) -> Get(USER#<id>, META)
//	username is taken?                  the conditional put of the claim (NotExists), never a read
//	AP6 does A follow B                 Get(FOLLOW#<a>, <b>)
//	AP4 whom A follows, newest first    Query GSI1 FOLLOWING#<a>, descending
//	AP5/FEED-008 A's followers, newest  Query GSI3 FOLLOWEE#<a>, descending (also the fan-out source)
//	is A blocked by B / B by A          Get(BLOCK#<b>, <a>), Get(BLOCK#<a>, <b>); batched per page
//	has A muted B (home feed)           Get(MUTE#<a>, <b>)
//	FEED-009 notifications, newest      Query NOTIF#<user>, begins_with(SK, "N#"), descending
//	unread notifications, count         Query GSI2 UNREAD#<user> (sparse: only unread ones)
//	FEED-004/AP3 get a post             Get(POST#<id>, META)
//	was a client's post id used before  the conditional put of the post and a check of POST#<id>/GONE
//	FEED-002/AP2 author's posts, newest Query GSI1 USER#<author>, descending
//	FEED-007 posts by tag, newest       Query GSI2 TAG#<tag>, descending -> BatchGet(POST#<id>, META)
//	a post's tags (edit, delete)        Query POST#<id>, begins_with(SK, "TAG#")
//	did U like P (liked_by_me)          Get(POST#<p>, LIKE#<u>), batched per page
//	FEED-005 likes of P, newest first   Query GSI3 LIKES#<p>, descending
//	FEED-006 comments of P, oldest      Query POST#<p>, begins_with(SK, "COMMENT#"), ascending (ULIDs)
//	was event E applied by consumer C   the conditional put of APPLIED#<C>#<E> (NotExists)
//	AP1/FEED-003 home feed              the timeline store's page + Query GSI1 USER#<author> of
//	                                    the followed celebrities and the reader; BatchGet of the
//	                                    posts, authors and edges (app/feed.go)
//	who is present (has a stream log)   Query STREAMERS (keys only; read again every second)
//	U's stream events after n           Query STREAM#<u>, SK between E#<n> and E#<head>, ascending
//	                                    -> BatchGet(SPOST#<post_id>, <post>) of its feed.posts
//	webhook endpoints                   Query WEBHOOKS (cached 1 s by the webhooks consumer)
//	an endpoint's due deliveries        Query WHQ#<endpoint>, SK <= <now 13>~, ascending
//	followed celebrities                Query CELEBRITIES (cached 1 s) -> BatchGet FOLLOW#<reader>
//	streak of a user (every app open)   the write-through cache, else Get(STREAK#<user>, META)
//	is this activity a duplicate        the conditional put of ACTKEY#<user>#<key hash> (NotExists);
//	                                    an event's: of its ACT#<user>, EV#<ts>#<event id> (NotExists)
//	points history, last N local days   Query ACT#<user>, between(DAY#<from>, DAY#<to>), descending
//	top streaks                         Query GSI2 TOPSTREAKS#<shard>, descending, on every shard
//	top authors of a day/week/month     Query GSI2 TOPAUTHORS#<period>#<key>, descending
//	likes a deleted post had counted    Query LBPOST#<post>, begins_with(SK, "LIKES#")
//
// Secondary indexes (every index the schema uses; `rookery migrate` creates them all). The
// entities that fill GSI1..GSI4 are added with the social core and timelines (issues 4 and 5):
//
//	GSI1  GSI1PK/GSI1SK  following          FOLLOWING#<id> / <ts>#<followee>    (AP4)
//	                     posts by author    USER#<author>  / <ts>#POST#<id>     (FEED-002, AP2)
//	                     likes by user      LIKED#<user>   / <ts>#<post>        (data export)
//	                     comments by author COMMENTS#<user> / <ts>#<post>#<id>  (data export)
//	                     notifs by actor    NOTIFBY#<actor> / <ts>#<user>#<id>  (erasure)
//	GSI2  GSI2PK/GSI2SK  posts by tag       TAG#<tag>      / <ts>#POST#<id>     (FEED-007)
//	                     unread notifs      UNREAD#<user>  / <event id>         (FEED-009)
//	                     top streaks        TOPSTREAKS#<shard> / <streak>#<user> (seed 001)
//	                     top authors        TOPAUTHORS#<period>#<key> / <score>#<author> (FEED-010)
//	GSI3  GSI3PK/GSI3SK  followers          FOLLOWEE#<id>  / <ts>#FOLLOWER#<id> (FEED-008, AP5)
//	                     likes of a post    LIKES#<post>   / <ts>#<user>        (FEED-005)
//	                     blocks, mutes of   BLOCKED#<id>, MUTED#<id> / <by>     (erasure)
//	GSI4  GSI4PK/GSI4SK  timelines by post  POST#<id>      / FEED#<user>        (seed 004 delete-by-post)
//
// <ts> is the time in Unix milliseconds, 13 digits, so that byte order is time order. Index queries
// are eventually consistent on DynamoDB (docs/table.md): exact answers (AP6) come from Gets.
var Schema = table.Schema{Indexes: []table.Index{gsi1, gsi2, gsi3, gsi4}}

// The secondary indexes, by what they serve (the table above). Code names these, never the
// strings: an item joins an index by setting its PK and SK attributes, a query names it.
//
// The partitions written with every like, comment, notification and follow but read through the
// index whole only by a user's export, erasure and follow lists, and otherwise with keys alone
// (unread counts; fan-out's followers, a reader's following), are kept as keys only where the
// store can (table.Index.KeysOnly; the embedded store): a notification or a follow is then one
// copy of its attributes, not three, and reading a list of keys reads only keys. So are the
// leaderboards: their entries are rewritten with every score and streak change (three scores a
// post) and read a short page at a time behind a cache, each item then read from the base. An
// author's posts are kept with the two attributes a timeline entry needs (queryAuthorPosts, which
// the read path's pulls, rebuilds and merges use): a post is about a kilobyte, and a full copy
// doubled what each post and each change of its counts wrote (docs/performance.md).
var (
	gsi1 = table.Index{Name: "GSI1", PK: "GSI1PK", SK: "GSI1SK", // following; posts by author
		KeysOnly:  []string{followingPK(""), likedByPK(""), commentsByPK(""), notifiedByPK("")},
		Projected: []table.Projection{{Prefix: postsByAuthorPK(""), Attributes: entryAttributes}}}
	gsi2 = table.Index{Name: "GSI2", PK: "GSI2PK", SK: "GSI2SK", // posts by tag; unread; boards
		KeysOnly: []string{unreadPK(""), streakBoardPrefix, authorBoardPrefix}}
	gsi3 = table.Index{Name: "GSI3", PK: "GSI3PK", SK: "GSI3SK", // followers; likes of a post
		KeysOnly: []string{followersPK("")}}
	// gsi4 is the index of timelines by post that timeline/tablestore needs (tablestore.Index: a
	// test in cmd checks they agree; the store checks the table has it when opened).
	gsi4 = table.Index{Name: "GSI4", PK: "GSI4PK", SK: "GSI4SK"}
)

// The queries of the access patterns (the table above), newest first where the index sorts by time.
func followingQuery(user string) table.Query {
	return table.Query{Index: gsi1.Name, PK: followingPK(user)}
}
func followersQuery(user string) table.Query {
	return table.Query{Index: gsi3.Name, PK: followersPK(user)}
}
func postsByAuthorQuery(a string) table.Query {
	return table.Query{Index: gsi1.Name, PK: postsByAuthorPK(a), Desc: true}
}
func postsByTagQuery(tag string) table.Query {
	return table.Query{Index: gsi2.Name, PK: postsByTagPK(tag), Desc: true}
}
func likesQuery(post string) table.Query {
	return table.Query{Index: gsi3.Name, PK: likesPK(post), Desc: true}
}
func unreadQuery(user string) table.Query {
	return table.Query{Index: gsi2.Name, PK: unreadPK(user), Desc: true}
}
func streakBoardQuery(shard int) table.Query {
	return table.Query{Index: gsi2.Name, PK: streakBoardPK(shard), Desc: true}
}
func authorBoardQuery(pk string) table.Query {
	return table.Query{Index: gsi2.Name, PK: pk, Desc: true}
}

// withLimit and withCursor return q with a page size, and a cursor.
func withLimit(q table.Query, limit int) table.Query { q.Limit = limit; return q }
func withCursor(q table.Query, limit int, cursor string) table.Query {
	q.Limit, q.Cursor = limit, cursor
	return q
}

// prefixQuery is the query of the items of partition pk whose sort key starts with prefix.
func prefixQuery(pk, prefix string) table.Query {
	return table.Query{PK: pk, SK: table.SKCond{Op: table.SKBeginsWith, Value: prefix}}
}

func notificationsQuery(user string) table.Query {
	q := prefixQuery(notifPK(user), "N#")
	q.Desc = true
	return q
}
func commentsQuery(post string) table.Query { return prefixQuery(postKey(post).PK, "COMMENT#") }
func dailyQuery(user string) table.Query    { return prefixQuery(actPK(user), dayPrefix) }
func boardTalliesQuery(post string) table.Query {
	return prefixQuery(boardPostKey(post).PK, tallyPrefix)
}
func boardLikesQuery(post string) table.Query { return prefixQuery(boardPostKey(post).PK, "LIKE#") }
func dayOfDaily(sk string) (streak.Date, error) {
	return streak.ParseDate(strings.TrimPrefix(sk, dayPrefix))
}
func dayOfTally(sk string) (streak.Date, error) {
	return streak.ParseDate(strings.TrimPrefix(sk, tallyPrefix))
}
func setIndex(it table.Item, ix table.Index, pk, sk string) { it[ix.PK], it[ix.SK] = pk, sk }

// leaveIndex is the update that takes an item out of ix.
func leaveIndex(ix table.Index) []string { return []string{ix.PK, ix.SK} }

const (
	dayPrefix   = "DAY#"
	tallyPrefix = "LIKES#"
)

// The kinds of key a view's batch read mixes (loadView), told apart by their partition.
func isUserKey(k table.Key) bool   { return strings.HasPrefix(k.PK, "USER#") }
func isFollowKey(k table.Key) bool { return strings.HasPrefix(k.PK, "FOLLOW#") }
func isMuteKey(k table.Key) bool   { return strings.HasPrefix(k.PK, "MUTE#") }

// blockerOf returns the blocker of a block edge's key; ok is false for another kind of key.
func blockerOf(k table.Key) (blocker string, ok bool) { return strings.CutPrefix(k.PK, "BLOCK#") }

const skMeta = "META"

func userKey(id string) table.Key { return table.Key{PK: "USER#" + id, SK: skMeta} }

func usernameKey(username string) table.Key {
	return table.Key{PK: "USERNAME#" + strings.ToLower(username), SK: skMeta}
}

func followKey(follower, followee string) table.Key {
	return table.Key{PK: "FOLLOW#" + follower, SK: followee}
}

// followerOf and followeeOf return the two users of a follow edge from its key.
func followerOf(edge table.Key) string { return strings.TrimPrefix(edge.PK, "FOLLOW#") }
func followeeOf(edge table.Key) string { return edge.SK }

// followItem is the edge follower -> followee with its two index entries.
func followItem(follower, followee string, at time.Time) table.Item {
	k, ts := followKey(follower, followee), tsKey(at)
	return table.Item{
		table.PK: k.PK, table.SK: k.SK,
		"follower_id": follower, "followee_id": followee, "followed_at": at.UnixMilli(),
		gsi1.PK: followingPK(follower), gsi1.SK: ts + "#" + followee,
		gsi3.PK: followersPK(followee), gsi3.SK: ts + "#FOLLOWER#" + follower,
	}
}

func postKey(id string) table.Key { return table.Key{PK: "POST#" + id, SK: skMeta} }

// postGoneKey is the key of deleted post id's mark.
func postGoneKey(id string) table.Key { return table.Key{PK: "POST#" + id, SK: "GONE"} }

// postOf is the id of post item k.
func postOf(k table.Key) string { return strings.TrimPrefix(k.PK, "POST#") }

func postTagKey(id, tag string) table.Key { return table.Key{PK: "POST#" + id, SK: "TAG#" + tag} }

func likeKey(post, user string) table.Key { return table.Key{PK: "POST#" + post, SK: "LIKE#" + user} }

func likeItem(post, user string, at time.Time) table.Item {
	k := likeKey(post, user)
	return table.Item{table.PK: k.PK, table.SK: k.SK, "post_id": post, "user_id": user, "liked_at": at.UnixMilli(),
		gsi3.PK: likesPK(post), gsi3.SK: tsKey(at) + "#" + user,
		gsi1.PK: likedByPK(user), gsi1.SK: tsKey(at) + "#" + post}
}

// likedByPK and commentsByPK index a user's likes and comments (GSI1), for their data export and
// erasure; notifiedByPK the notifications a user caused (GSI1), blockedByPK and mutedByPK who
// blocked and muted a user (GSI3), for erasure.
func likedByPK(user string) string    { return "LIKED#" + user }
func commentsByPK(user string) string { return "COMMENTS#" + user }
func notifiedByPK(user string) string { return "NOTIFBY#" + user }
func blockedByPK(user string) string  { return "BLOCKED#" + user }
func mutedByPK(user string) string    { return "MUTED#" + user }

// commentIndexSK orders a user's comments by time.
func commentIndexSK(post, id string, at time.Time) string { return tsKey(at) + "#" + post + "#" + id }

// edgeFrom and edgeTo are the two users of an edge (a follow, block or mute) from its key, KIND#<from>
// and <to>.
func edgeFrom(k table.Key) string { _, from, _ := strings.Cut(k.PK, "#"); return from }
func edgeTo(k table.Key) string   { return k.SK }

func blockKey(blocker, blocked string) table.Key {
	return table.Key{PK: "BLOCK#" + blocker, SK: blocked}
}
func muteKey(muter, muted string) table.Key { return table.Key{PK: "MUTE#" + muter, SK: muted} }

func notifPK(user string) string             { return "NOTIF#" + user }
func recipientOf(notif table.Key) string     { return strings.TrimPrefix(notif.PK, "NOTIF#") }
func notifKey(user, id string) table.Key     { return table.Key{PK: notifPK(user), SK: "N#" + id} }
func notifRefKey(user, ref string) table.Key { return table.Key{PK: notifPK(user), SK: "REF#" + ref} }
func unreadPK(user string) string            { return "UNREAD#" + user }

// likeRef and followRef name the notification of a like or a follow (notifRefKey), so that undoing
// it before the notification is read removes it.
func likeRef(post, liker string) string { return "like:" + post + ":" + liker }
func followRef(follower string) string  { return "follow:" + follower }

// refOf is the ref of notification item it, "" if its kind has none.
func refOf(it table.Item) string {
	switch it.String("type") {
	case "like":
		return likeRef(it.String("post_id"), it.String("actor_id"))
	case "follow":
		return followRef(it.String("actor_id"))
	}
	return ""
}

func idempotencyKey(caller, keyHash string) table.Key {
	return table.Key{PK: "IDEM#" + caller + "#" + keyHash, SK: "-"}
}

func commentKey(post, id string) table.Key { return table.Key{PK: "POST#" + post, SK: "COMMENT#" + id} }

func likesPK(post string) string { return "LIKES#" + post }

func postsByAuthorPK(author string) string { return "USER#" + author }
func postsByTagPK(tag string) string       { return "TAG#" + tag }

// postIndexSK orders a post in the author and tag indexes: creation time, then id.
func postIndexSK(id string, created time.Time) string { return tsKey(created) + "#POST#" + id }

func followingPK(user string) string { return "FOLLOWING#" + user }
func followersPK(user string) string { return "FOLLOWEE#" + user }

const celebritiesPK = "CELEBRITIES"

func celebrityKey(author string) table.Key { return table.Key{PK: celebritiesPK, SK: author} }

// appliedKey records that consumer group applied event id.
func appliedKey(group, id string) table.Key {
	return table.Key{PK: "APPLIED#" + group + "#" + id, SK: "-"}
}

func tsKey(t time.Time) string { return fmt.Sprintf("%013d", t.UnixMilli()) }

func streakKey(user string) table.Key   { return table.Key{PK: "STREAK#" + user, SK: skMeta} }
func streakCacheKey(user string) string { return "streak:" + user }

// streakBoardKeys places a current streak in its shard of the streak leaderboard.
func streakBoardKeys(user string, current, shards int) (pk, sk string) {
	h := fnv.New32a()
	h.Write([]byte(user))
	return streakBoardPK(int(h.Sum32() % uint32(shards))), fmt.Sprintf("%09d#%s", current, user)
}

func streakBoardPK(shard int) string { return fmt.Sprintf("%s%03d", streakBoardPrefix, shard) }

func activityClaimKey(user, keyHash string) table.Key {
	return table.Key{PK: "ACTKEY#" + user + "#" + keyHash, SK: "-"}
}

func activityItem(user, id, typ, source string, points int64, at time.Time, expires int64) table.Item {
	return table.Item{table.PK: actPK(user), table.SK: "EV#" + tsKey(at) + "#" + id, "activity_id": id, "type": typ,
		"source": source, "points": points, "occurred_at": at.UnixMilli(), table.TTL: expires}
}

func dailyKey(user string, day streak.Date) table.Key {
	return table.Key{PK: actPK(user), SK: dayPrefix + day.String()}
}

func actPK(user string) string { return "ACT#" + user }

func scoreKey(author, period, key string) table.Key {
	return table.Key{PK: "SCORE#" + author, SK: period + "#" + key}
}

func authorBoardPK(period, key string) string { return authorBoardPrefix + period + "#" + key }

// The prefixes of the leaderboards' partitions of gsi2.
const (
	streakBoardPrefix = "TOPSTREAKS#"
	authorBoardPrefix = "TOPAUTHORS#"
)

func boardPostKey(post string) table.Key { return table.Key{PK: "LBPOST#" + post, SK: "POST"} }
func boardLikeKey(post, user string) table.Key {
	return table.Key{PK: "LBPOST#" + post, SK: "LIKE#" + user}
}
func boardTallyKey(post string, day streak.Date) table.Key {
	return table.Key{PK: "LBPOST#" + post, SK: tallyPrefix + day.String()}
}

func streamPK(user string) string { return "STREAM#" + user }
func streamHeadKey(user string) table.Key {
	return table.Key{PK: streamPK(user), SK: "HEAD"}
}
func streamEventKey(user string, seq uint64) table.Key {
	return table.Key{PK: streamPK(user), SK: streamEventSK(seq)}
}
func streamEventSK(seq uint64) string { return fmt.Sprintf("E#%020d", seq) }
func streamDedupeKey(user, source string) table.Key {
	return table.Key{PK: streamPK(user), SK: "D#" + source}
}

// streamPostKey is the key of the stream post item of a post's JSON (as feed.post events show it;
// a reader's "liked_by_me" makes another): its SK is a hash of the JSON.
func streamPostKey(postID string, post []byte) table.Key {
	sum := sha256.Sum256(post)
	return table.Key{PK: streamPostPK(postID), SK: hex.EncodeToString(sum[:16])}
}
func streamPostPK(postID string) string { return "SPOST#" + postID }

// streamEventsQuery reads user's stream events from seq from to seq to, oldest first.
func streamEventsQuery(user string, from, to uint64) table.Query {
	return table.Query{PK: streamPK(user), SK: table.SKCond{Op: table.SKBetween, Value: streamEventSK(from), Value2: streamEventSK(to)}}
}
func ticketKey(id string) table.Key { return table.Key{PK: "TICKET#" + id, SK: skMeta} }

const webhooksPK = "WEBHOOKS"

func webhookKey(id string) table.Key          { return table.Key{PK: webhooksPK, SK: id} }
func webhooksQuery() table.Query              { return table.Query{PK: webhooksPK} }
func webhookQueuePK(ep string) string         { return "WHQ#" + ep }
func webhookQueueQuery(ep string) table.Query { return table.Query{PK: webhookQueuePK(ep)} }
func webhookQueueKey(ep string, due time.Time, msgID string) table.Key {
	return table.Key{PK: webhookQueuePK(ep), SK: tsKey(due) + "#" + msgID}
}

// webhookDueQuery reads ep's deliveries due by now, the earliest due first.
func webhookDueQuery(ep string, now time.Time) table.Query {
	return table.Query{PK: webhookQueuePK(ep), SK: table.SKCond{Op: table.SKLe, Value: tsKey(now) + "#~"}}
}
func dueOfQueueKey(k table.Key) (time.Time, bool) {
	ms, _, ok := strings.Cut(k.SK, "#")
	n, err := strconv.ParseInt(ms, 10, 64)
	return time.UnixMilli(n), ok && err == nil
}
func webhookMarkerKey(ep, msgID string) table.Key {
	return table.Key{PK: "WHMSG#" + ep, SK: msgID}
}

const streamersPK = "STREAMERS"

func streamerKey(user string) table.Key { return table.Key{PK: streamersPK, SK: user} }
func streamersQuery() table.Query       { return table.Query{PK: streamersPK} }
func streamerOf(k table.Key) string     { return k.SK }
