// Package app holds Rookery's use cases: every rule about who may do what, what a valid request
// is, and how it maps onto the table, written once above the storage interfaces. Handlers in
// httpapi decode a request, call one method here, and encode the result; backends know nothing of
// these rules.
package app

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/internal/keylock"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/timeline"
)

// Deps are what the App works with.
type Deps struct {
	Table table.Table
	// Events is the event log (its dead-letter queue is administered here); Outbox writes events
	// atomically with the changes that cause them.
	Events events.Log
	Outbox *events.Outbox
	Clock  rookery.Clock
	IDs    rookery.IDSource
	// Timelines keeps home timelines; nil runs no fan-out (the home feed is not served).
	Timelines timeline.Store
	// CelebrityThreshold: authors with more followers are not fanned out; 0 means
	// DefaultCelebrityThreshold.
	CelebrityThreshold int
	// TimelineCap is the timelines' cap (how much a rebuild pulls); 0 means timeline.DefaultCap.
	TimelineCap int
	// Engagement configures activities, streaks and leaderboards.
	Engagement Engagement
	// OtherGroups are consumer groups beside the App's own (the analytics export's), whose dead
	// letters the DLQ administration knows too.
	OtherGroups []string
	// CursorKey seals the home feed's cursors (the table seals every other list's); processes that
	// serve the same feeds must share it. Nil means a random key: cursors of this process only.
	CursorKey []byte
	// Logger takes what goes wrong off the request path (a failed timeline rebuild); nil logs
	// nothing.
	Logger *slog.Logger
	// OnRebuild is told the outcome of each timeline rebuild (RebuildComplete, ...); nil: nothing.
	OnRebuild func(outcome string)
	// WebhookPolicy says which endpoint URLs may be registered.
	WebhookPolicy WebhookPolicy
	// OnWebhookQueued, if set, is told of every delivery queued, so that a dispatcher in this
	// process can start on it at once instead of at its next poll.
	OnWebhookQueued func(endpoint string)
	// StreamTable is where the consumers append to the stream logs; nil means Table. rookery
	// serve passes the embedded store's unsynced writes when its event log is in the store's
	// engine (pebble.DB.Unsynced says why that is safe).
	StreamTable table.Table
	// UnsyncedConsumers lets the consumers' writes go unsynced (table.WithoutSync): rookery serve
	// sets it when the event log keeps its offsets in the store's engine, where they are written
	// after the handlers' writes, so that a crash which loses a handler's write loses its event's
	// offset too, and the event is handled again. Writes that stage events are synced still.
	UnsyncedConsumers bool
	// FollowerCacheIDs, if positive, keeps authors' follower lists in memory for fan-out, up to
	// this many ids in all. Only for a process that is its store's only writer of follows (the
	// embedded store), since a list kept is trusted until this process changes it. With SoleWriter
	// and exact index queries (IndexLag 0), readers' edges are kept for the read path too, up to as
	// many again (readerEdges).
	FollowerCacheIDs int
	// SoleWriter says that this process is the only writer of its table (the embedded store), so
	// what it caches of what it writes stays true until it writes it again: authors' newest posts
	// (recentPosts), copies of posts and authors (kept in process), and which users are deleted
	// (goneUsers).
	SoleWriter bool
	// StreamPresenceDelay is how long a user's first stream waits before it begins when consumers
	// run in other processes too (scale-out): PresenceRefresh and a little more. 0 (one process)
	// waits for nothing.
	StreamPresenceDelay time.Duration
	// DeletedGrace is how long a deleted user's username stays taken and their id unusable
	// (DeleteUser); 0 means DefaultDeletedGrace.
	DeletedGrace time.Duration
	// IndexLag is how long after a write the table's index queries may still miss it: 0 for an
	// exact store (Pebble), DynamoIndexLag for DynamoDB.
	IndexLag time.Duration
	// PostCacheTTL, if positive, keeps copies of posts and of their authors' profiles for the reads
	// that render posts, each for this long (copies): in this process for a SoleWriter, else in the
	// engagement cache, which every process that writes posts or users must then share (Redis).
	PostCacheTTL time.Duration
	// PostCacheSize bounds the copies of each kind (posts, authors) a SoleWriter keeps in process,
	// and the posts kept rendered; 0: DefaultPostCacheSize. Their memory counts in the process's.
	PostCacheSize int
	// OnPostCacheRead is told how many of a read's posts or authors (kind "post", "author") were
	// cached (hits) and not; nil: nothing.
	OnPostCacheRead func(kind string, hits, misses int)
	// BilledReads says that the store bills reads by the item in a batch read and by the byte in
	// a query (DynamoDB): reads that may do either choose by what they cost (scanEdges).
	BilledReads bool
	// FeedPages, if positive, keeps up to this many feed pages in a SoleWriter, each served again
	// until something it shows changes (feedPages).
	FeedPages int
	// OnFeedPageRead is told whether each feed read found its page kept (hit); nil: nothing.
	OnFeedPageRead func(hit bool)
	// Streams, if set, turns live streams on: the live consumer keeps the present users' stream
	// logs, and every appended event is published to it. Nil: no streams (OpenStream fails).
	Streams StreamPublisher
}

// App is the application: the use cases over the table and the event pipeline.
type App struct {
	table       table.Table
	events      events.Log
	outbox      *events.Outbox
	clock       rookery.Clock
	ids         rookery.IDSource
	hot         *hotCounters
	posts       *copies // nil: no copies kept (and authors nil too)
	authors     *copies
	billedReads bool

	timelines          timeline.Store
	celebrityThreshold int
	timelineCap        int
	celebs             snapshot[[]string]
	recent             recentPosts
	rebuilds           singleflight.Group // timeline rebuilds under way, by reader
	pages              *feedPages         // nil: none kept

	eng         Engagement
	boards      boardCache
	streakLocks keylock.Set[string]

	log       *slog.Logger
	onRebuild func(outcome string)
	cursors   *table.Cursors

	otherGroups []string
	streams     StreamPublisher

	present           snapshot[map[string]bool]
	appendersOnce     sync.Once // the stream logs' appenders start with the first append
	appenders         []chan appendReq
	soleWriter        bool // see Deps.SoleWriter
	presenceDelay     time.Duration
	streamTable       table.Table
	unsyncedConsumers bool
	followers         *followerLists
	scores            *keptScores // nil unless SoleWriter
	readers           *readerEdges
	liked             *keptByUser[idSet] // the posts each reader likes (likedOf)
	blockers          *keptByUser[idSet] // who blocks each user (blockersOf)
	rendered          *renderedPosts
	postPayloads      *postPayloads     // the latest post events' payloads, decoded (postPayload)
	gone              *keptByUser[bool] // which users are deleted (goneUsers)
	webhookPolicy     WebhookPolicy
	endpoints         snapshot[[]Webhook]
	onQueued          func(endpoint string)
	deletedGrace      time.Duration
	indexLag          time.Duration
}

// New returns the App over d.
func New(d Deps) *App {
	if d.CelebrityThreshold <= 0 {
		d.CelebrityThreshold = DefaultCelebrityThreshold
	}
	if d.TimelineCap <= 0 {
		d.TimelineCap = timeline.DefaultCap
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.OnRebuild == nil {
		d.OnRebuild = func(string) {}
	}
	if d.CursorKey == nil {
		d.CursorKey = make([]byte, 32)
		_, _ = rand.Read(d.CursorKey)
	}
	if d.StreamTable == nil {
		d.StreamTable = d.Table
	}
	if d.DeletedGrace <= 0 {
		d.DeletedGrace = DefaultDeletedGrace
	}
	var pages *feedPages
	if d.SoleWriter && d.FeedPages > 0 { // every write from here on is noted (feedPages)
		ch := &changes{}
		d.Table = changeTable{Table: d.Table, c: ch}
		if d.Timelines != nil {
			d.Timelines = changeTimelines{Store: d.Timelines, c: ch}
		}
		pages = newFeedPages(ch, d.FeedPages, d.Clock, d.OnFeedPageRead)
	}
	eng := d.Engagement.withDefaults(d.Clock)
	store := func(func(table.Item) rookery.Post) copyStore { return cacheCopies{eng.Cache} }
	size := postCacheSize(d)
	if d.SoleWriter {
		store = func(render func(table.Item) rookery.Post) copyStore { return newLocalCopies(d.Clock, render, size) }
	}
	posts, authors := newCopies(store, !d.SoleWriter, d.PostCacheTTL, d.OnPostCacheRead)
	var ch *changes
	if pages != nil {
		ch = pages.changes
		if posts != nil {
			posts.changes, authors.changes = ch, ch
		}
	}
	hot := newHotCounters(d.Table)
	hot.committed = func(ctx context.Context, k table.Key, err error) {
		posts.settle(ctx, d.Table, postOf(k), k, err)
	}
	return &App{recent: recentPosts{ttl: soleTTL(d.SoleWriter), changes: ch}, pages: pages, soleWriter: d.SoleWriter, scores: keptScoresOf(d), posts: posts, authors: authors, billedReads: d.BilledReads, deletedGrace: d.DeletedGrace, indexLag: d.IndexLag, streamTable: d.StreamTable, unsyncedConsumers: d.UnsyncedConsumers, followers: newFollowerLists(d.FollowerCacheIDs, d.CelebrityThreshold), readers: readersOf(d), liked: idSetsOf(d), blockers: idSetsOf(d), rendered: newRenderedPosts(size), postPayloads: newPostPayloads(postPayloadsKept), gone: goneOf(d), streams: d.Streams, presenceDelay: d.StreamPresenceDelay, webhookPolicy: d.WebhookPolicy, onQueued: d.OnWebhookQueued, log: d.Logger, onRebuild: d.OnRebuild, cursors: table.NewCursors(d.CursorKey), otherGroups: d.OtherGroups, table: d.Table, events: d.Events, outbox: d.Outbox, clock: d.Clock, ids: d.IDs, hot: hot,
		timelines: d.Timelines, celebrityThreshold: d.CelebrityThreshold, timelineCap: d.TimelineCap,
		eng: eng, streakLocks: keylock.Set[string]{Compare: strings.Compare}}
}

// caller returns the caller in ctx, or Unauthenticated.
func caller(ctx context.Context, op rookery.Op) (rookery.Caller, error) {
	c, ok := rookery.CallerFrom(ctx)
	if !ok {
		return rookery.Caller{}, rookery.E(op, rookery.Unauthenticated, "authentication required")
	}
	return c, nil
}

// actAs returns nil if the caller in ctx may act as user id: the user themself, or a server token.
func actAs(ctx context.Context, op rookery.Op, id string) error {
	c, err := caller(ctx, op)
	if err != nil {
		return err
	}
	if c.Server || c.UserID == id {
		return nil
	}
	return rookery.E(op, rookery.Forbidden, "you may act only as yourself")
}

// asServer returns nil if the caller in ctx holds a server-scope token.
func asServer(ctx context.Context, op rookery.Op) error {
	c, err := caller(ctx, op)
	if err != nil {
		return err
	}
	if !c.Server {
		return rookery.E(op, rookery.Forbidden, "this needs a server-scope token")
	}
	return nil
}

// Page is one page of a list with its opaque cursor ("" on the last page).
type Page[T any] struct {
	Items []T
	Next  string
	// Memo, if set, is shared by every read served this very page again (a kept feed page,
	// feedPages), which must not change it: a transport may keep its rendering of the page there.
	Memo *Memo
}

// Memo holds a rendering of a page that is served again unchanged.
type Memo struct {
	once     sync.Once
	rendered []byte
}

// Rendered returns the page's rendering, made by render on the first call; callers must not
// change it.
func (m *Memo) Rendered(render func() []byte) []byte {
	m.once.Do(func() { m.rendered = render() })
	return m.rendered
}

// event returns a new event of type typ keyed by key with payload p, made in ctx (its trace, if
// any, goes on to the event's consumers).
func (a *App) event(ctx context.Context, typ, key string, p any, at time.Time) (rookery.Event, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return rookery.Event{}, err
	}
	return rookery.Event{ID: a.ids(), Type: typ, Version: 1, Key: key, OccurredAt: rookery.Time{Time: at}, Payload: b,
		Trace: events.TraceParent(ctx)}, nil
}

// writeWithEvent commits writes and the outbox items of evs in one transaction, then wakes the
// relay. Condition errors name the index in writes.
func (a *App) writeWithEvent(ctx context.Context, writes []table.Write, evs ...rookery.Event) error {
	for _, ev := range evs {
		ow, err := a.outbox.Write(ev)
		if err != nil {
			return err
		}
		writes = append(writes, ow)
	}
	if err := a.table.TransactWrite(ctx, writes); err != nil {
		return err
	}
	a.outbox.Notify()
	return nil
}

// GroupTypes are the event types each consumer group handles (the cases of its Apply function; nil:
// every type). The runner skips the others on every log; on SNS/SQS the queues' filter policies keep
// them out.
var GroupTypes = map[string][]string{
	CountersGroup:        {FollowCreated, FollowDeleted, LikeCreated, LikeDeleted, CommentCreated, CommentDeleted, PostCreated, PostDeleted},
	NotificationsGroup:   {FollowCreated, FollowDeleted, LikeCreated, LikeDeleted, CommentCreated, PostCreated, PostEdited},
	ActivitiesGroup:      {PostCreated, CommentCreated, LikeCreated},
	LeaderboardsGroup:    {PostCreated, PostDeleted, LikeCreated, LikeDeleted},
	WebhooksGroup:        nil, // webhookMessage maps most types
	ErasureGroup:         {UserDeleted, FollowCreated, LikeCreated, CommentCreated, PostCreated, NotificationsCreated, NotificationCreated, BlockCreated, MuteCreated, ActivityRecorded},
	LiveGroup:            {PostCreated, PostEdited, PostDeleted, FollowCreated, FollowDeleted, BlockCreated, MuteCreated, MuteDeleted, ActivityRecorded},
	FanoutGroup:          {PostCreated},
	TimelineCleanupGroup: {PostDeleted, FollowCreated, FollowDeleted, BlockCreated, MuteCreated, MuteDeleted},
}

// ConsumedTypes returns GroupTypes as a server consumes them. With home timelines (withTimelines),
// the live group leaves PostCreated to fan-out, which reads the followers anyway (ApplyLive), so no
// delivery brings it one.
func ConsumedTypes(withTimelines bool) map[string][]string {
	types := maps.Clone(GroupTypes)
	if withTimelines {
		types[LiveGroup] = slices.DeleteFunc(slices.Clone(types[LiveGroup]), func(t string) bool { return t == PostCreated })
	}
	return types
}

// Consumers returns the event consumers of the application, for the workers to run.
func (a *App) Consumers() []events.Consumer {
	// The groups whose delay users do not see at once are Background: while the home timelines,
	// the live streams and webhooks are behind, they yield the CPU to them (events.Runner.YieldAfter).
	cs := []events.Consumer{
		// Concurrency lets increments of one hot post meet in one batch (hotCounters).
		{Group: CountersGroup, Handle: a.ApplyCounts, Concurrency: 32, Background: true, FirstDeliveries: true},
		{Group: NotificationsGroup, Handle: a.ApplyNotifications, Concurrency: 16, Background: true, FirstDeliveries: true},
		// Each event is a synced transaction: several at once share the WAL's syncs. Activities of one
		// user take turns on their streak record in a process (record), so more do not collide.
		{Group: ActivitiesGroup, Handle: a.ApplyActivities, Concurrency: 16, Background: true, FirstDeliveries: true},
		{Group: LeaderboardsGroup, Handle: a.ApplyLeaderboards, Concurrency: 4, Background: true, FirstDeliveries: true},
		// Webhooks are live delivery too (the app's backend reacting at once, a push on a mention, say).
		{Group: WebhooksGroup, Handle: a.ApplyWebhooks, Concurrency: 8},
		// One read per creating event (is a party to it deleted?), and accounts' erasure.
		{Group: ErasureGroup, Handle: a.ApplyErasure, Concurrency: 8, Background: true},
	}
	if a.streams != nil {
		// Its appends are synced transactions: many at once share the WAL's syncs.
		cs = append(cs, events.Consumer{Group: LiveGroup, Handle: a.ApplyLive, Concurrency: 32})
	}
	if a.timelines != nil {
		// Timeline work waits out an outage of the timeline store (Redis) however long it lasts:
		// dead-lettering it would leave timelines that exist but miss posts. The breaker paces it.
		cs = append(cs,
			events.Consumer{Group: FanoutGroup, Handle: a.ApplyFanout, Concurrency: 8, MaxAttempts: math.MaxInt32},
			events.Consumer{Group: TimelineCleanupGroup, Handle: a.ApplyTimelineCleanup, MaxAttempts: math.MaxInt32},
		)
	}
	types := ConsumedTypes(a.timelines != nil)
	for i := range cs {
		cs[i].Types = types[cs[i].Group]
	}
	if a.unsyncedConsumers {
		for i := range cs {
			handle := cs[i].Handle
			cs[i].Handle = func(ctx context.Context, ev rookery.Event) error { return handle(table.WithoutSync(ctx), ev) }
		}
	}
	return cs
}

// maxListLimit is the most items a list returns per page (API.md: limit 1..100).
const maxListLimit = 100

// checkLimit adds a field error unless limit is 1..maxListLimit.
func checkLimit(fe *rookery.FieldErrors, limit int) {
	if limit < 1 || limit > maxListLimit {
		fe.Add("limit", "must be 1 to 100")
	}
}

// limitErr is checkLimit for a request with no other fields to check.
func limitErr(op rookery.Op, limit int) error {
	var fe rookery.FieldErrors
	checkLimit(&fe, limit)
	return fe.Err(op)
}

// idOf reports whether s is 1..max bytes of ASCII letters, digits and the characters in extra. Every
// id that reaches a key is checked with it, so none can hold a key separator.
func idOf(s string, max int, extra string) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || strings.IndexByte(extra, c) >= 0) {
			return false
		}
	}
	return true
}
