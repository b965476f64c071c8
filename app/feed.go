package app

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/timeline"
)

// The home feed (GET /v1/feed; DESIGN decisions 3, 4 and 6). The feed of a reader is every post of
// the people they follow and their own, newest first by (created_at, id), without deleted, blocked,
// muted or invisible posts. It is read from three kinds of source, merged:
//
//   - the reader's stored timeline, which fan-out keeps. Invariant (timeline.Store): a complete
//     timeline holds every post that was fanned out to it and is not older than its floor, and
//     shows nothing below it; so it holds every such post newer than the oldest entry it shows.
//     Below that entry the timeline says nothing;
//   - author timelines (the posts-by-author index) of the followed celebrities, whose posts are not
//     fanned out, and of the reader themself;
//   - below the stored timeline's oldest entry, or with no timeline store, or when it is down: the
//     author timelines of everyone the reader follows (pull).
//
// Every source returns its posts older than the cursor, newest first, up to n. A source that
// returned n is complete only down to its last post (its floor); the merged candidates are complete
// down to the highest floor, and only those are used. Candidates are then checked against the
// current state in one batch read (the post exists, the reader still follows its author and has not
// muted them, no block either way), so reads are right before the cleanup workers catch up. The
// cursor is the position (time, id) of the last post shown: stable across sources and new posts.

// followMerge is how many of a followee's recent posts a new follow (or an unmute) merges into the
// reader's timeline.
const followMerge = 100

// pullParallelism bounds the author-timeline queries one request runs at once.
const pullParallelism = 16

// celebritiesTTL is how long an API process trusts its copy of the celebrity registry.
const celebritiesTTL = time.Second

// Feed returns a page of the acting user's home feed, after cursor ("" for the newest).
func (a *App) Feed(ctx context.Context, cursor string, limit int) (Page[rookery.Post], error) {
	const op rookery.Op = "app.Feed"
	var fe rookery.FieldErrors
	checkLimit(&fe, limit)
	reader, err := actingUser(ctx, op)
	if err != nil {
		return Page[rookery.Post]{}, err
	}
	before, ok := a.parseFeedCursor(reader, cursor)
	if !ok {
		fe.Add("cursor", "is not a cursor of this list")
	}
	if err := fe.Err(op); err != nil {
		return Page[rookery.Post]{}, err
	}
	// A reader who is no user has no feed, also while a deleted user's timeline still holds posts
	// (the erasure removes it later). With deletion marks kept the check comes first: it answers
	// from memory after a reader's first read, and that first read's mark then answers the check of
	// the timeline's rebuild too, which a check run beside it would leave to read the user again.
	// Without them it reads the user, beside the page's reads.
	if a.gone != nil {
		if err := a.notGone(ctx, op, reader); err != nil {
			return Page[rookery.Post]{}, err
		}
		return a.feedPage(ctx, reader, cursor, before, limit)
	}
	exists := make(chan error, 1)
	go func() { exists <- a.exists(ctx, op, reader) }()
	p, err := a.feedPage(ctx, reader, cursor, before, limit)
	if xerr := <-exists; xerr != nil {
		return Page[rookery.Post]{}, xerr
	}
	return p, err
}

// feedPage returns the page of reader's feed after cursor (before, parsed), from the pages kept
// where there are.
func (a *App) feedPage(ctx context.Context, reader, cursor string, before timeline.Entry, limit int) (Page[rookery.Post], error) {
	if a.pages == nil {
		return (&feedRead{a: a, reader: reader}).page(ctx, before, limit)
	}
	key := feedPageKey{reader: reader, cursor: cursor, limit: limit}
	if p, ok := a.pages.get(key); ok {
		return p, nil
	}
	stamp, at := a.pages.changes.stamp(), a.clock.Now() // before anything is read
	r := &feedRead{a: a, reader: reader, keep: true}
	p, err := r.page(ctx, before, limit)
	if err == nil {
		a.pages.put(key, stamp, at, r, p)
	}
	return p, err
}

// page reads the page of r's feed of up to limit posts older than before.
func (r *feedRead) page(ctx context.Context, before timeline.Entry, limit int) (Page[rookery.Post], error) {
	a, reader := r.a, r.reader
	// One more than the page, so that a last page that happens to be full says so (no cursor).
	want := limit + 1
	// Room for what one chunk (below) may add past want, so that the page is allocated once.
	out := make([]rookery.Post, 0, want+want/10+1)
	for {
		refs, floor, done, err := r.candidates(ctx, before, want)
		if err != nil {
			return Page[rookery.Post]{}, err
		}
		// Hydrate only as many candidates as the page still needs, and a tenth more for what is hidden:
		// each candidate hydrated costs a post read, and few are hidden.
		for len(refs) > 0 {
			need := want - len(out)
			chunk := refs[:min(len(refs), need+need/10+1)]
			refs = refs[len(chunk):]
			if out, err = r.show(ctx, chunk, out); err != nil {
				return Page[rookery.Post]{}, err
			}
			if len(out) > limit { // one more than the page: there is a next page
				last := out[limit-1]
				return Page[rookery.Post]{Items: out[:limit], Next: a.feedCursor(reader, timeline.Entry{PostID: last.ID, At: last.CreatedAt.Time})}, nil
			}
		}
		if done {
			// The only page of a reader who was never created; where no deletion marks are kept,
			// Feed has read the user already.
			if len(out) == 0 && a.gone != nil {
				if err := a.exists(ctx, "app.Feed", reader); err != nil {
					return Page[rookery.Post]{}, err
				}
			}
			return Page[rookery.Post]{Items: nonNilPosts(out)}, nil
		}
		before = floor
	}
}

func nonNilPosts(ps []rookery.Post) []rookery.Post {
	if ps == nil {
		return []rookery.Post{}
	}
	return ps
}

// feedQuery identifies reader's feed to the cursor seal: a cursor of one reader's feed is refused
// in another's.
func feedQuery(reader string) table.Query { return table.Query{PK: "feed:" + reader} }

// feedCursor is the position of e (its time in ms and its post id), sealed.
func (a *App) feedCursor(reader string, e timeline.Entry) string {
	return a.cursors.Seal(feedQuery(reader), table.Position{Key: table.Key{PK: strconv.FormatInt(e.At.UnixMilli(), 10), SK: e.PostID}})
}

func (a *App) parseFeedCursor(reader, c string) (timeline.Entry, bool) {
	if c == "" {
		return timeline.Entry{}, true
	}
	q := feedQuery(reader)
	q.Cursor = c
	pos, err := a.cursors.Open("app.Feed", q)
	if err != nil {
		return timeline.Entry{}, false
	}
	n, err := strconv.ParseInt(pos.Key.PK, 10, 64)
	if err != nil || n < 0 || !validPostID(pos.Key.SK) {
		return timeline.Entry{}, false
	}
	return timeline.Entry{PostID: pos.Key.SK, At: time.UnixMilli(n).UTC()}, true
}

// feedRead is one reading of a feed; it loads what it needs once.
type feedRead struct {
	a      *App
	reader string

	keep      bool             // the page is kept (feedPages): note what it is made of in seen
	seen      []timeline.Entry // the references hydrated
	rebuilt   bool             // the timeline was rebuilt in this request (once at most)
	pulling   bool             // the stored timeline has nothing older than the position reached: pull
	following []string         // nil until loaded
	celebs    []string         // the followed celebrities; nil until loaded
}

// candidates returns references to the posts older than before, newest first, that may be in the
// feed, complete down to floor; done means there is nothing older than floor (or than the last).
func (r *feedRead) candidates(ctx context.Context, before timeline.Entry, n int) (refs []timeline.Entry, floor timeline.Entry, done bool, err error) {
	if !r.pulling {
		stored, ok, err := r.storedPage(ctx, before, n)
		if err != nil {
			return nil, floor, false, err
		}
		// Positions only go down within a request: once the timeline has nothing older, it never will.
		r.pulling = !ok || len(stored) == 0
		if !r.pulling {
			return r.withStored(ctx, stored, before, n)
		}
	}
	// Pull mode: everyone followed, and the reader.
	if err := r.loadFollowing(ctx); err != nil {
		return nil, floor, false, err
	}
	pulled, floor, err := r.a.authorPosts(ctx, append(slices.Clone(r.following), r.reader), before, n, false)
	if err != nil {
		return nil, floor, false, err
	}
	return above(pulled, floor), floor, floor.PostID == "", nil
}

// withStored is timeline mode: a stored timeline page merged with the followed celebrities' and the
// reader's own posts older than before, complete down to the stored page's last entry at most.
func (r *feedRead) withStored(ctx context.Context, stored []timeline.Entry, before timeline.Entry, n int) (refs []timeline.Entry, floor timeline.Entry, done bool, err error) {
	if err := r.loadCelebrities(ctx); err != nil {
		return nil, floor, false, err
	}
	pulled, pfloor, err := r.a.authorPosts(ctx, append(slices.Clone(r.celebs), r.reader), before, n, false)
	if err != nil {
		return nil, floor, false, err
	}
	floor = stored[len(stored)-1] // below it the timeline says nothing
	if pfloor.PostID != "" && floor.Older(pfloor) {
		floor = pfloor
	}
	return above(append(stored, pulled...), floor), floor, false, nil
}

// storedPage reads the reader's stored timeline older than before; ok is false when there is no
// usable timeline (no store, or the store is down: the caller pulls). A missing timeline is rebuilt
// first, once per request.
func (r *feedRead) storedPage(ctx context.Context, before timeline.Entry, n int) ([]timeline.Entry, bool, error) {
	tl := r.a.timelines
	if tl == nil {
		return nil, false, nil
	}
	n = min(n, 100) // a timeline page's most; withStored's floor is the last entry in any case
	p, err := tl.Page(ctx, r.reader, before, n)
	if !p.Exists && err == nil && !r.rebuilt {
		r.rebuilt = true
		if err = r.rebuild(ctx); err == nil {
			p, err = tl.Page(ctx, r.reader, before, n)
		}
	}
	if rookery.IsKind(err, rookery.Unavailable) {
		return nil, false, nil // reads fall back to pulling; a lost timeline is rebuilt when it is back
	}
	return p.Entries, p.Exists, err
}

// Outcomes of a timeline rebuild, as Deps.OnRebuild reports them.
const (
	RebuildComplete   = "complete"   // the timeline was published
	RebuildFailed     = "failed"     // the build stays unread; the next read builds it again
	RebuildSuperseded = "superseded" // another build completed it, or began after this pull
)

// rebuildTimeout bounds a timeline rebuild, which outlives the read that began it.
const rebuildTimeout = 15 * time.Second

// rebuild builds the reader's missing timeline (buildTimeline), one build at a time per reader in
// this process: a read that finds one under way waits for it. The build goes on when the read
// that began it ends (its client gave up): under a slow store a build that each read began again
// and dropped at the read's end would never be finished, and every read would begin one more.
func (r *feedRead) rebuild(ctx context.Context) error {
	a, reader := r.a, r.reader
	built := a.rebuilds.DoChan(reader, func() (_ any, err error) {
		// A panic here is no request's: left to singleflight it would end the process.
		defer func() {
			if v := recover(); v != nil {
				err = rookery.E(rookery.Op("app.Feed"), rookery.Internal, fmt.Errorf("timeline rebuild: panic: %v\n%s", v, debug.Stack()))
			}
		}()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rebuildTimeout)
		defer cancel()
		return nil, a.buildTimeline(ctx, reader)
	})
	select {
	case res := <-built:
		return res.Err
	case <-ctx.Done(): // the read ends (as a store's call would: Unavailable); the build goes on
		return rookery.E(rookery.Op("app.Feed"), rookery.Unavailable, ctx.Err())
	}
}

// buildTimeline builds reader's missing timeline: Begin makes it exist for fan-out (a post
// committed from then on reaches it), one pull brings the newest posts of everyone they follow and
// their own, and Complete publishes what the pull brought completely. A build whose pull fails
// stays unread, keeping what fan-out pushed to it; the next read builds it again (timeline.Store).
func (a *App) buildTimeline(ctx context.Context, reader string) error {
	// A deleted user's timeline is erased: no read makes it again.
	if err := a.notGone(ctx, "app.Feed", reader); err != nil {
		return err
	}
	build, err := a.timelines.Begin(ctx, reader)
	if err == nil && build == "" {
		return nil // complete: another read built it meanwhile
	}
	done := false
	if err == nil {
		var following []string
		if following, err = a.followingOf(ctx, reader); err == nil {
			done, err = a.fill(ctx, reader, build, following)
		}
	}
	switch {
	case err != nil:
		a.log.Warn("timeline rebuild failed; the next read builds it again", "user", reader, "err", err)
		a.onRebuild(RebuildFailed)
	case done:
		a.onRebuild(RebuildComplete)
	default:
		a.onRebuild(RebuildSuperseded)
	}
	return err
}

// fill completes build of reader's timeline with the newest posts of everyone in following and the
// reader's own that one pull brings completely: the entries above the pull's floor. What a
// timeline stores must not lag: a post whose fan-out skipped this timeline (it ran before Begin)
// and that the pull missed would be missing above the timeline's floor for good. So where another
// process may write posts, the pull queries the author timelines, not the in-process cache of them
// (which may lack another process's post of a moment ago). A sole writer's cache lags nothing:
// every post is added to it after its commit, and fan-out adds it again before pushing it to any
// timeline, so a post whose fan-out ran before Begin is in its author's cached entry, or the
// author is not cached and is queried.
func (a *App) fill(ctx context.Context, reader, build string, following []string) (bool, error) {
	sources := append(slices.Clone(following), reader)
	per := min(max(2*a.timelineCap/len(sources), 10), table.MaxQueryLimit)
	pulled, floor, err := a.authorPosts(ctx, sources, timeline.Entry{}, per, !a.soleWriter)
	if err != nil {
		return false, err
	}
	entries := above(pulled, floor)
	done, err := a.timelines.Complete(ctx, reader, build, entries, floor)
	if a.log.Enabled(ctx, slog.LevelDebug) {
		a.log.Debug("timeline rebuild", "user", reader, "build", build, "following", len(following), "entries", len(entries), "floor", floor.PostID, "completed", done, "err", err)
	}
	return done, err
}

// above returns the entries that are not older than floor (all if floor is zero), each post once,
// newest first.
func above(es []timeline.Entry, floor timeline.Entry) []timeline.Entry {
	if floor.PostID != "" {
		es = slices.DeleteFunc(es, func(e timeline.Entry) bool { return e.Older(floor) })
	}
	slices.SortFunc(es, timeline.NewestFirst)
	return slices.CompactFunc(es, func(x, y timeline.Entry) bool { return x.PostID == y.PostID })
}

// authorPosts reads, from the author timeline of each of authors, up to n posts older than before
// (zero: from the newest), as entries; floor is the highest last entry of an author that may have
// more (zero if none may): the merged entries are complete down to it. A read (fresh false) serves
// the authors the cache of recent posts covers first, with one lock, and queries the others
// (authorPage); a write's read (fresh) queries them all (authorPageFresh).
func (a *App) authorPosts(ctx context.Context, authors []string, before timeline.Entry, n int, fresh bool) (all []timeline.Entry, floor timeline.Entry, err error) {
	var mu sync.Mutex
	add := func(es []timeline.Entry, complete bool) {
		all = append(all, es...)
		if !complete && len(es) > 0 {
			if last := es[len(es)-1]; floor.PostID == "" || floor.Older(last) {
				floor = last
			}
		}
	}
	page := a.authorPageFresh
	if !fresh {
		page = a.authorPage
		var found []cachedPage
		found, authors = a.recent.pages(authors, before, n, a.clock.Now())
		for _, p := range found {
			add(p.entries, p.complete)
		}
	}
	read := func(author string) {
		es, complete, perr := page(ctx, author, before, n)
		mu.Lock()
		defer mu.Unlock()
		if perr != nil {
			err = perr
			return
		}
		add(es, complete)
	}
	if len(authors) <= 1 { // the reader alone, or one author not cached: no goroutine
		for _, author := range authors {
			read(author)
		}
		return all, floor, err
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, pullParallelism)
	for _, author := range authors {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			read(author)
		}()
	}
	wg.Wait()
	return all, floor, err
}

// show appends to out the Posts of the candidate references that the reader may see in their
// feed, with one batch read: the post exists and is still its author's, the author is the reader
// or followed and not muted, no block either way.
func (r *feedRead) show(ctx context.Context, refs []timeline.Entry, out []rookery.Post) ([]rookery.Post, error) {
	if len(refs) == 0 {
		return out, nil
	}
	if r.keep {
		r.seen = append(r.seen, refs...)
	}
	authors, ids := make([]string, 0, len(refs)), make([]string, 0, len(refs))
	for _, e := range refs {
		authors = append(authors, e.AuthorID)
		ids = append(ids, e.PostID)
	}
	v, err := r.a.loadView(ctx, r.reader, authors, ids, nil, true)
	if err != nil {
		return out, err
	}
	for _, e := range refs {
		if p, ok := v.inFeed(e); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// inFeed returns the post e refers to as v's viewer's home feed shows it, if it does: the post
// exists and is still its author's, the author is the viewer or followed and not muted, no block
// either way (v read the posts).
func (v view) inFeed(e timeline.Entry) (rookery.Post, bool) {
	c := v.posts[e.PostID]
	if c.item == nil {
		return rookery.Post{}, false
	}
	// The rendered post (its copy's, or kept by its rev) answers the rules: the item's attributes
	// are map lookups.
	var p rookery.Post
	if c.post != nil {
		p = *c.post
	} else {
		p = v.rendered.post(c.item)
	}
	switch {
	case p.Author.ID != e.AuthorID:
	case e.AuthorID != v.viewer && (!v.follows[e.AuthorID] || v.muted[e.AuthorID]):
	case !v.maySee(rookery.Caller{UserID: v.viewer}, p):
	default:
		return v.show(p), true
	}
	return rookery.Post{}, false
}

// loadFollowing reads everyone the reader follows.
func (r *feedRead) loadFollowing(ctx context.Context) error {
	if r.following != nil {
		return nil
	}
	following, err := r.a.followingOf(ctx, r.reader)
	if err == nil {
		r.following = following
	}
	return err
}

// followingOf reads everyone user follows (the GSI1 index: eventually consistent on DynamoDB).
func (a *App) followingOf(ctx context.Context, user string) ([]string, error) {
	if ids, ok := a.followingFromSets(user); ok {
		return ids, nil
	}
	following := []string{}
	q := followingQuery(user)
	q.Limit = table.MaxQueryLimit
	err := table.EachKeyPage(ctx, a.table, q, func(edges []table.Key) error {
		for _, k := range edges {
			following = append(following, followeeOf(k))
		}
		return nil
	})
	return following, err
}

// loadCelebrities finds which authors of the celebrity registry the reader follows (Gets, so a
// follow made a moment ago counts).
func (r *feedRead) loadCelebrities(ctx context.Context) error {
	if r.celebs != nil {
		return nil
	}
	all, err := r.a.celebrities(ctx)
	if err != nil {
		return err
	}
	celebs := []string{}
	for chunk := range slices.Chunk(all, table.MaxBatchGet) {
		keys := make([]table.Key, len(chunk))
		for i, c := range chunk {
			keys[i] = followKey(r.reader, c)
		}
		got, err := r.a.table.BatchGet(ctx, keys)
		if err != nil {
			return err
		}
		for i, it := range got {
			if it != nil {
				celebs = append(celebs, chunk[i])
			}
		}
	}
	r.celebs = celebs
	return nil
}

// celebrityCache is an API process's copy of the celebrity registry.
// celebrities returns the registry: every author one of whose posts fan-out skipped. An author
// stays in it, so that their posts from then on are merged at read time even if they fall below
// the threshold again.
func (a *App) celebrities(ctx context.Context) ([]string, error) {
	return a.celebs.get(a.clock.Now(), celebritiesTTL, func() ([]string, error) {
		var authors []string
		err := table.EachPage(ctx, a.table, table.Query{PK: celebritiesPK, Limit: table.MaxQueryLimit}, func(items []table.Item) error {
			for _, it := range items {
				authors = append(authors, it.String(table.SK))
			}
			return nil
		})
		return authors, err
	})
}

// registerCelebrity records that fan-out skipped a post of author.
func (a *App) registerCelebrity(ctx context.Context, author string) error {
	known, err := a.celebrities(ctx)
	if err != nil {
		return err
	}
	if slices.Contains(known, author) {
		return nil // the registry only grows, so even a stale copy that holds author is right
	}
	k := celebrityKey(author)
	if err := a.table.Put(ctx, table.Item{table.PK: k.PK, table.SK: k.SK}); err != nil {
		return err
	}
	a.celebs.mu.Lock()
	a.celebs.at = time.Time{} // this process sees it at once
	a.celebs.mu.Unlock()
	if a.pages != nil {
		a.pages.changes.changed(keyCelebs, "") // the registry a read may have had before
	}
	return nil
}
