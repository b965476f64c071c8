package app

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"
	"golang.org/x/text/unicode/norm"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/timeline"
)

// Event types of posts.
const (
	PostCreated = "PostCreated"
	PostEdited  = "PostEdited"
	PostDeleted = "PostDeleted"
)

// PostPayload is the payload of the post events, version 1 (seed 002 §2.5.1).
type PostPayload struct {
	PostID     string       `json:"post_id"`
	AuthorID   string       `json:"author_id"`
	Visibility string       `json:"visibility"`
	CreatedAt  rookery.Time `json:"created_at"`
	// NewMentions (PostEdited only) are the users the edit tells of the post: those it mentions
	// for the first time who can see it, and, when it makes a followers post public, those the
	// post mentioned before but could not tell (its item's "untold"). They are notified.
	NewMentions []string `json:"new_mentions,omitempty"`
	// Notify (PostCreated only) are the users the post mentions who can see it, as they were
	// when it was written: they are notified (whatever an edit changes before that). Nil in the
	// events of versions before it: those notify the post's mentions as the consumer finds them.
	Notify *[]string `json:"notify,omitempty"`
}

// PostInput is the body of POST /v1/posts.
type PostInput struct {
	ID         string          `json:"id"`
	Text       string          `json:"text"`
	Tags       []string        `json:"tags"`
	Media      []rookery.Media `json:"media"`
	Visibility string          `json:"visibility"`
}

// PostEdit is the body of PATCH /v1/posts/{id}: the fields to change: text, tags and visibility (a
// post may be turned to followers or back).
type PostEdit struct {
	Text       *string   `json:"text"`
	Tags       *[]string `json:"tags"`
	Visibility *string   `json:"visibility"`
}

const (
	maxPostText = 5000
	maxTags     = 10
	maxMedia    = 10
)

var (
	// A tag's characters: letters with their combining marks (the vowel signs of Devanagari or
	// Thai, the accents of text typed decomposed), digits, _, and the joiners Persian and Indic
	// scripts write words with (U+200C, U+200D).
	hashtagRE = regexp.MustCompile(`#([\p{L}\p{M}\p{N}_\x{200C}\x{200D}]+)`)
	mentionRE = regexp.MustCompile(`@([A-Za-z0-9_]+)`)
)

// marked returns the words of text that re (a sign, then the word as group 1) finds, each of min
// to max characters, where the sign begins a word: at the start of text or after a character
// that is not a letter, mark, digit, _ or one of notAfter. So the fragment of a URL
// (example.com/docs#install) is no hashtag and an email address (me@bob.com) no mention; and a
// run longer than max is no word rather than a word cut short.
func marked(re *regexp.Regexp, text, notAfter string, min, max int) []string {
	var out []string
	for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
		if r, _ := utf8.DecodeLastRuneInString(text[:m[0]]); m[0] > 0 &&
			(unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r) || r == '_' || strings.ContainsRune(notAfter, r)) {
			continue
		}
		if w := text[m[2]:m[3]]; between(w, min, max) {
			out = append(out, w)
		}
	}
	return out
}

// between reports whether w has min to max characters, counted in its composed form (NFC), so
// that the same word typed decomposed is no longer.
func between(w string, min, max int) bool {
	n := utf8.RuneCountInString(norm.NFC.String(w))
	return n >= min && n <= max
}

// hashtags and mentions return the #hashtags and @usernames of text, as written.
func hashtags(text string) []string { return marked(hashtagRE, text, "&/#", 1, 64) }
func mentions(text string) []string { return marked(mentionRE, text, "@./", 3, 30) }

// validTag: 1..64 of a hashtag's characters (so a tag never holds a key separator).
func validTag(t string) bool {
	if !between(t, 1, 64) {
		return false
	}
	for _, r := range t {
		if !unicode.IsLetter(r) && !unicode.IsMark(r) && !unicode.IsDigit(r) && r != '_' && r != '\u200c' && r != '\u200d' {
			return false
		}
	}
	return true
}

// normTag is the form a tag is kept and looked up in: without its #, lower-cased, in Unicode's
// composed form (NFC), so that "#Café" typed composed or decomposed is one tag.
func normTag(t string) string {
	return norm.NFC.String(strings.ToLower(strings.TrimPrefix(t, "#")))
}

// tagsOf returns the post's tags: given plus #hashtags of text, normalized (normTag), each once, in
// order.
func tagsOf(fe *rookery.FieldErrors, given []string, text string) []string {
	var tags []string
	add := func(t string) {
		t = normTag(t)
		if !slices.Contains(tags, t) {
			tags = append(tags, t)
		}
	}
	for _, t := range given {
		if !validTag(strings.TrimPrefix(t, "#")) {
			fe.Add("tags", "a tag is 1 to 64 letters, digits or _")
			return nil
		}
		add(t)
	}
	for _, t := range hashtags(text) {
		add(t)
	}
	if len(tags) > maxTags {
		fe.Add("tags", "a post has at most 10 tags, #hashtags included")
	}
	return tags
}

func checkVisibility(fe *rookery.FieldErrors, v string) {
	if v != rookery.Public && v != rookery.Followers {
		fe.Add("visibility", "must be public or followers")
	}
}

func checkText(fe *rookery.FieldErrors, text string) {
	if n := utf8.RuneCountInString(text); n < 1 || n > maxPostText || blank(text) {
		fe.Add("text", "must be 1 to 5000 characters, not only spaces")
	}
}

// blank says whether s shows nothing: it is empty or only white space. Texts people read (a post,
// a comment, a display name) must not be.
func blank(s string) bool { return strings.TrimSpace(s) == "" }

// validPostID: the id of an existing post is a ULID (a client-chosen one is checked strictly on
// create); reads accept 1..64 letters and digits, so no id can reach a key with a separator.
func validPostID(id string) bool { return idOf(id, 64, "") }

// author returns the user the caller acts as for a write: themselves, or for a server token the
// user named by X-On-Behalf-Of (required).
func actingUser(ctx context.Context, op rookery.Op) (string, error) {
	c, err := caller(ctx, op)
	if err != nil {
		return "", err
	}
	if c.Server && c.OnBehalfOf == "" {
		return "", rookery.FieldErrors{{Name: "X-On-Behalf-Of", Reason: "a server token must name the user it acts for"}}.Err(op)
	}
	return c.Acting(), nil
}

// maxMentions is how many users a post may mention (notify): the first ones in its text.
const maxMentions = 20

// mentionsOf returns the ids of existing users named @username in text (each once, in order, up to
// maxMentions), but those author has blocked. A mention of a user who has blocked author is
// Forbidden.
func (a *App) mentionsOf(ctx context.Context, op rookery.Op, author, text string) ([]string, error) {
	var names []string
	for _, m := range mentions(text) {
		if n := strings.ToLower(m); !slices.Contains(names, n) && len(names) < maxMentions {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	keys := make([]table.Key, len(names))
	for i, n := range names {
		keys[i] = usernameKey(n)
	}
	epoch := a.gone.current()
	claims, err := a.table.BatchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, c := range claims {
		if c != nil {
			// A claim is marked deleted in the transaction that leaves its user's tombstone, so it
			// says whether its user is gone, for the erasure checks of the mentions' notifications.
			a.gone.keep(c.String("user_id"), epoch, userGone(c))
		}
		if c != nil && !userGone(c) && !slices.Contains(ids, c.String("user_id")) {
			ids = append(ids, c.String("user_id"))
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	// A user the author has blocked is not mentioned: they cannot see the post.
	blocks, err := a.exist(ctx, ids, func(id string) table.Key { return blockKey(author, id) })
	if err != nil {
		return nil, err
	}
	mentioned := ids[:0]
	for i, id := range ids {
		if !blocks[i] {
			mentioned = append(mentioned, id)
		}
	}
	ids = mentioned
	if len(ids) == 0 {
		return nil, nil
	}
	blocked, err := a.haveBlocked(ctx, ids, author)
	if err != nil {
		return nil, err
	}
	if slices.Contains(blocked, true) {
		return nil, rookery.E(op, rookery.Forbidden, "a user you mention has blocked you")
	}
	return ids, nil
}

// unseenBy returns the users of mentioned who cannot see a post of author's with visibility: for a
// followers post, those who do not follow author (read when the post is written, so that whether
// they are told of it does not depend on when the notifications consumer gets to it).
func (a *App) unseenBy(ctx context.Context, author, visibility string, mentioned []string) ([]string, error) {
	if visibility != rookery.Followers || len(mentioned) == 0 {
		return nil, nil
	}
	follows, err := a.exist(ctx, mentioned, func(u string) table.Key { return followKey(u, author) })
	if err != nil {
		return nil, err
	}
	var unseen []string
	for i, u := range mentioned {
		if !follows[i] && u != author {
			unseen = append(unseen, u)
		}
	}
	return unseen, nil
}

// CreatePost creates a post by the acting user and returns it; created is false when in.ID names
// a post this author already made with the same text (a retry), which is returned as it is. An id
// taken by another post, or by a deleted one, is Conflict; an id that is not a ULID is Invalid.
func (a *App) CreatePost(ctx context.Context, in PostInput) (p rookery.Post, created bool, err error) {
	const op rookery.Op = "app.CreatePost"
	author, err := actingUser(ctx, op)
	if err != nil {
		return p, false, err
	}
	var fe rookery.FieldErrors
	checkText(&fe, in.Text)
	tags := tagsOf(&fe, in.Tags, in.Text)
	if in.Visibility == "" {
		in.Visibility = rookery.Public
	}
	checkVisibility(&fe, in.Visibility)
	if len(in.Media) > maxMedia {
		fe.Add("media", "a post has at most 10 media references")
	}
	for _, m := range in.Media {
		if !idOf(m.ID, 128, "-_") || !validTag(m.Type) {
			fe.Add("media", "each needs an id (letters, digits, - and _) and a type (a word)")
			break
		}
	}
	id := in.ID
	if id != "" {
		if _, perr := ulid.ParseStrict(id); perr != nil {
			fe.Add("id", "must be a ULID")
		}
	} else {
		id = a.ids()
	}
	if err := fe.Err(op); err != nil {
		return p, false, err
	}
	user, err := a.liveAuthor(ctx, author)
	if rookery.IsKind(err, rookery.NotFound) {
		return p, false, rookery.E(op, rookery.NotFound, "the author is not a user")
	} else if err != nil {
		return p, false, err
	}
	mentions, err := a.mentionsOf(ctx, op, author, in.Text)
	if err != nil {
		return p, false, err
	}
	unseen, err := a.unseenBy(ctx, author, in.Visibility, mentions)
	if err != nil {
		return p, false, err
	}
	notify := []string{} // never nil, which marks an event from before notify
	for _, m := range mentions {
		if !slices.Contains(unseen, m) {
			notify = append(notify, m)
		}
	}
	media, _ := json.Marshal(in.Media)
	now := a.clock.Now().UTC().Truncate(time.Millisecond)
	k := postKey(id)
	item := table.Item{
		table.PK: k.PK, table.SK: k.SK, "id": id, "author_id": author, "text": in.Text,
		"tags": nonNil(tags), "given_tags": nonNil(givenTags(in.Tags)), "mentions": nonNil(mentions), "media": media, "visibility": in.Visibility,
		"created_at": now.UnixMilli(), gsi1.PK: postsByAuthorPK(author), gsi1.SK: postIndexSK(id, now),
		"rev": int64(1), // every write of the item adds one (postCache)
	}
	if len(unseen) > 0 {
		item["untold"] = unseen // told if the post is made public (EditPost)
	}
	// An id this process made is new (a ULID): no item is at its key, so the put needs no
	// condition and no read of the key first. A client's id may be taken (a retry, another post),
	// or have been a post's that was deleted: the likes and comments others left on that one stay
	// under its id, and a new post must not take them over.
	writes := []table.Write{table.ImmutablePutWrite(item)}
	if in.ID != "" {
		writes = []table.Write{table.PutWrite(item, table.NotExists(table.PK)), table.CheckWrite(postGoneKey(id), table.NotExists(table.PK))}
	}
	for _, t := range tags {
		writes = append(writes, table.ImmutablePutWrite(tagItem(id, t, author, now)))
	}
	ev, err := a.event(ctx, PostCreated, "post:"+id, PostPayload{PostID: id, AuthorID: author, Visibility: in.Visibility, CreatedAt: rookery.Time{Time: now}, Notify: &notify}, now)
	if err != nil {
		return p, false, rookery.E(op, rookery.Internal, err)
	}
	err = a.writeWithEvent(ctx, writes, ev)
	var ce *table.ConditionError
	if errors.As(err, &ce) && ce.Index == 1 {
		return p, false, rookery.E(op, rookery.Conflict, "a post with this id was deleted; its id is not used again")
	}
	if errors.As(err, &ce) && ce.Index == 0 {
		old, gerr := a.table.Get(ctx, k)
		if gerr != nil {
			return p, false, gerr
		}
		if old.String("author_id") != author || old.String("text") != in.Text {
			return p, false, rookery.E(op, rookery.Conflict, "a post with this id exists")
		}
		return postFromItem(old, user), false, nil
	}
	if err != nil {
		return p, false, err
	}
	a.recent.add(timeline.Entry{PostID: id, AuthorID: author, At: now})
	a.posts.created(ctx, item)
	return postFromItem(item, user), true, nil
}

// givenTags normalizes the tags a client gave (without the text's hashtags); they are kept so an
// edit of the text alone keeps them.
func givenTags(given []string) []string {
	return tagsOf(&rookery.FieldErrors{}, given, "")
}

// tagItem is a post's entry in the posts-by-tag index: a pure function of its key (the post's id
// and the tag; the post's author and creation time never change), so its puts are immutable.
func tagItem(id, tag, author string, created time.Time) table.Item {
	k := postTagKey(id, tag)
	return table.Item{table.PK: k.PK, table.SK: k.SK, "post_id": id, "author_id": author,
		gsi2.PK: postsByTagPK(tag), gsi2.SK: postIndexSK(id, created)}
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// authorByID reads user id as an author; a user who is gone is just their id.
func (a *App) authorByID(ctx context.Context, id string) (rookery.Author, error) {
	u, err := a.liveAuthor(ctx, id)
	if rookery.IsKind(err, rookery.NotFound) {
		return rookery.Author{ID: id}, nil
	}
	return u, err
}

func authorOf(u table.Item) rookery.Author {
	return rookery.Author{ID: u.String("id"), Username: u.String("username"), DisplayName: u.String("display_name")}
}

func postFromItem(it table.Item, author rookery.Author) rookery.Post {
	p := rookery.Post{
		ID: it.String("id"), Author: author, Text: it.String("text"),
		Tags: nonNil(it.Strings("tags")), Mentions: nonNil(it.Strings("mentions")), Media: []rookery.Media{},
		Visibility: it.String("visibility"), CreatedAt: rookery.Time{Time: time.UnixMilli(it.Int("created_at")).UTC()},
		LikeCount: it.Int("like_count"), CommentCount: it.Int("comment_count"),
	}
	if m := it.Bytes("media"); len(m) > 0 && string(m) != "[]" { // most posts have none
		p.Media = decodeMedia(m)
	}
	if e := it.Int("edited_at"); e != 0 {
		p.EditedAt = rookery.Time{Time: time.UnixMilli(e).UTC()}
	}
	return p
}

// hydrate turns post items into Posts for the caller: it drops the ones the caller may not see
// (followers-only posts of authors the caller does not follow; posts across a block, either way)
// and fills in authors and liked_by_me, with one batch read.
func (a *App) hydrate(ctx context.Context, posts []table.Item) ([]rookery.Post, error) {
	c, _ := rookery.CallerFrom(ctx)
	var authors, ids, mentioned []string
	for _, it := range posts {
		authors = append(authors, it.String("author_id"))
		ids = append(ids, it.String("id"))
		mentioned = append(mentioned, it.Strings("mentions")...)
	}
	v, err := a.loadView(ctx, c.Acting(), authors, ids, mentioned, false)
	if err != nil {
		return nil, err
	}
	out := make([]rookery.Post, 0, len(posts))
	for _, it := range posts {
		if p := v.rendered.post(it); v.maySee(c, p) {
			out = append(out, v.show(p))
		}
	}
	return out, nil
}

// view is what rendering posts for one viewer needs, read in one batch: the authors, the viewer's
// follow edges, blocks either way and mutes of them, the viewer's likes of the posts, and (for the
// home feed, which starts from references) the posts themselves; then which users the posts
// mention are deleted.
type view struct {
	viewer                         string
	users                          map[string]table.Item
	posts                          map[string]copied // read, or copies; by id
	follows, blocked, muted, liked map[string]bool
	goneMentioned                  map[string]bool // shared by the views, which only read it
	rendered                       *renderedPosts
}

// loadView reads the view of viewer over authors and the posts ids (reading the posts too if
// withPosts; if not, mentioned are the users the posts mention), in batches of table.MaxBatchGet
// keys.
func (a *App) loadView(ctx context.Context, viewer string, authors, ids, mentioned []string, withPosts bool) (view, error) {
	vs, err := a.loadViews(ctx, []string{viewer}, authors, ids, mentioned, withPosts)
	if err != nil {
		return view{}, err
	}
	return *vs[viewer], nil
}

// loadViews is loadView for several viewers at once: the authors and posts are read once, each
// viewer's edges and likes beside them.
func (a *App) loadViews(ctx context.Context, viewers, authors, ids, mentioned []string, withPosts bool) (map[string]*view, error) {
	// Sized for what is read: grown from empty, they were much of a feed read's allocations.
	users, posts := make(map[string]table.Item, len(authors)), make(map[string]copied, len(ids)) // shared by the views
	vs := make(map[string]*view, len(viewers))
	var keys []table.Key
	var owners []*view // the view a key is read for; nil for the shared ones
	authors = slices.Compact(slices.Sorted(slices.Values(authors)))
	kept := a.authors.get(ctx, authors)
	for i, id := range authors {
		if kept[i].item != nil {
			users[id] = kept[i].item
		} else {
			keys, owners = append(keys, userKey(id)), append(owners, nil)
		}
	}
	var read, readUsers []table.Item // read from the table, for the copies
	if withPosts {
		kept := a.posts.get(ctx, ids)
		for i, id := range ids {
			if kept[i].item != nil {
				posts[id] = kept[i]
			} else {
				keys, owners = append(keys, postKey(id)), append(owners, nil)
			}
		}
	}
	// The viewers' edges are read whole (and kept) where that pays: for a view of edgesQueryMin
	// authors or more (a page), and for every view that starts from references (withPosts): the
	// home feed's, which a reader makes again and again even of a page by a few authors, and the
	// live consumer's views of the present users, who are sent every post of those they follow.
	// Other views use them if kept. The same for the posts they like.
	whole := len(authors) >= edgesQueryMin || withPosts
	wholeLikes := len(ids) >= edgesQueryMin || withPosts
	for _, viewer := range viewers {
		v := &view{viewer: viewer, users: users, posts: posts, rendered: a.rendered,
			follows: map[string]bool{}, blocked: map[string]bool{}, muted: map[string]bool{}, liked: map[string]bool{}}
		vs[viewer] = v
		if !rookery.ValidUserID(viewer) {
			continue
		}
		edges, err := a.edgeKeys(ctx, v, authors, withPosts, whole)
		if err != nil {
			return nil, err
		}
		for _, k := range edges {
			keys, owners = append(keys, k), append(owners, v)
		}
		liked, ok, err := a.likedOf(ctx, viewer, wholeLikes)
		if err != nil {
			return nil, err
		}
		if ok { // shared: the view only reads it
			v.liked = liked
			continue
		}
		for _, id := range ids {
			keys, owners = append(keys, likeKey(id, viewer)), append(owners, v)
		}
	}
	for start := 0; start < len(keys); start += table.MaxBatchGet {
		chunk := keys[start:min(len(keys), start+table.MaxBatchGet)]
		got, err := a.table.BatchGet(ctx, chunk)
		if err != nil {
			return nil, err
		}
		for i, it := range got {
			if it == nil {
				continue
			}
			k, sk, v := chunk[i], chunk[i].SK, owners[start+i]
			blocker, isBlock := blockerOf(k)
			switch {
			case isUserKey(k):
				users[it.String("id")] = it
				if a.authors != nil && !userGone(it) { // a deleted user's copy is their tombstone, which DeleteUser set
					readUsers = append(readUsers, it)
				}
			case isFollowKey(k):
				v.follows[sk] = true
			case isMuteKey(k):
				v.muted[sk] = true
			case isBlock:
				// Either direction hides the author's posts from the viewer.
				if blocker == v.viewer {
					v.blocked[sk] = true
				} else {
					v.blocked[blocker] = true
				}
			case sk == skMeta:
				posts[it.String("id")] = copied{item: it}
				if a.posts != nil {
					read = append(read, it)
				}
			default:
				v.liked[it.String("post_id")] = true
			}
		}
	}
	a.posts.fill(ctx, read...)
	a.authors.fill(ctx, readUsers...)
	if withPosts {
		for _, c := range posts {
			if c.post != nil {
				mentioned = append(mentioned, c.post.Mentions...)
			} else {
				mentioned = append(mentioned, c.item.Strings("mentions")...)
			}
		}
	}
	gone, err := a.goneMentioned(ctx, mentioned)
	if err != nil {
		return nil, err
	}
	for _, v := range vs {
		v.goneMentioned = gone
	}
	return vs, nil
}

// edgeKeys fills in v's viewer's edges to authors (sorted, distinct) from their kept sets (read
// whole first if they are not kept and whole is set), or with queries (scanEdges), and returns the
// keys of those still to be read: of each author, the follow edge, the blocks either way and
// (withMutes) the mute.
func (a *App) edgeKeys(ctx context.Context, v *view, authors []string, withMutes, whole bool) ([]table.Key, error) {
	sets, ok := a.readers.get(v.viewer)
	if !ok && whole {
		var err error
		if sets, ok, err = a.readerSetsOf(ctx, v.viewer); err != nil {
			return nil, err
		}
	}
	if ok && !sets.tooBig { // shared: the view only reads them
		v.follows, v.blocked, v.muted = sets.follows, sets.blocked, sets.muted
		return nil, nil
	}
	known, err := a.scanEdges(ctx, v, authors, withMutes)
	if err != nil {
		return nil, err
	}
	var keys []table.Key
	for _, id := range authors {
		if v.viewer == id {
			continue
		}
		for _, k := range []struct {
			key     table.Key
			scanned string
		}{{followKey(v.viewer, id), known.follows}, {blockKey(v.viewer, id), known.blocks}, {blockKey(id, v.viewer), known.blockedBy}} {
			if id > k.scanned {
				keys = append(keys, k.key)
			}
		}
		if withMutes && id > known.mutes {
			keys = append(keys, muteKey(v.viewer, id))
		}
	}
	return keys, nil
}

// scanned says, for each kind of edge of a viewer that loadViews reads, up to which author a query
// read them (edgesIn): the edges to authors after it are still to be read one by one ("": all).
type scanned struct{ follows, blocks, blockedBy, mutes string }

// scanEdges reads v's viewer's edges to authors (sorted, distinct) with a query per kind where that
// is cheaper than reading each author's edge. A store that bills reads by the item (DynamoDB: a
// read unit per item of a batch read, but per 4 KB of a query's items) queries the follow edges:
// about 25 edges a read unit, where reading each author's edge is one unit. A store that does not,
// but whose index queries are exact (Pebble), queries every kind, the viewer's blockers through
// the index of who blocked them: a query is one seek, where each key of a batch read is one, and
// most viewers block, mute and are blocked by no one.
func (a *App) scanEdges(ctx context.Context, v *view, authors []string, withMutes bool) (known scanned, err error) {
	if len(authors) < edgesQueryMin || !a.billedReads && a.indexLag != 0 {
		return known, nil
	}
	if known.follows, err = a.edgesIn(ctx, table.Query{PK: followKey(v.viewer, "").PK}, edgeTo, authors, v.follows); err != nil || a.billedReads {
		return known, err
	}
	if known.blocks, err = a.edgesIn(ctx, table.Query{PK: blockKey(v.viewer, "").PK}, edgeTo, authors, v.blocked); err != nil {
		return known, err
	}
	if known.blockedBy, err = a.edgesIn(ctx, table.Query{Index: gsi3.Name, PK: blockedByPK(v.viewer)}, edgeFrom, authors, v.blocked); err != nil {
		return known, err
	}
	if withMutes {
		known.mutes, err = a.edgesIn(ctx, table.Query{PK: muteKey(v.viewer, "").PK}, edgeTo, authors, v.muted)
	}
	return known, err
}

// edgesIn reads with query q (its PK and Index) the edges whose other end, by other, is one of
// authors (sorted, distinct: the query's range is the first to the last), up to edgesQueryPer
// edges per author, into set. It returns the author up to which it read them all: up to it, an
// author without an edge has none.
func (a *App) edgesIn(ctx context.Context, q table.Query, other func(table.Key) string, authors []string, set map[string]bool) (known string, err error) {
	last := authors[len(authors)-1]
	q.SK = table.SKCond{Op: table.SKBetween, Value: authors[0], Value2: last}
	q.Limit, q.KeysOnly = edgesQueryPer*len(authors), true
	page, err := a.table.Query(ctx, q)
	if err != nil {
		return "", err
	}
	for _, k := range page.Keys {
		set[other(k)] = true
	}
	switch {
	case page.Next == "":
		return last, nil
	case len(page.Keys) > 0:
		return other(page.Keys[len(page.Keys)-1]), nil
	}
	return "", nil
}

// edgesQueryMin is the fewest authors whose edges a query reads (below it, a batch read of each
// costs about as much); edgesQueryPer bounds the edges it reads per author.
const (
	edgesQueryMin = 4
	edgesQueryPer = 4
)

// maySee reports whether the caller c (whose acting user is v's viewer) may see post p (as
// renderedPosts renders it: its author's id alone): not of a deleted user, not across a block, and
// a followers post only by its author, a follower, or a server token of its own.
func (v view) maySee(c rookery.Caller, p rookery.Post) bool {
	author := p.Author.ID
	if v.blocked[author] || userGone(v.users[author]) {
		return false
	}
	return p.Visibility != rookery.Followers || c.Server && c.OnBehalfOf == "" || v.viewer == author || v.follows[author]
}

// show is post p (as renderedPosts renders it) as v's viewer sees it: with its author's profile,
// whether the viewer likes it, and mentioning no deleted user.
func (v view) show(p rookery.Post) rookery.Post {
	p.Author = authorOf(v.users[p.Author.ID])
	p.LikedByMe = v.liked[p.ID]
	p.Mentions = mentionsLeft(p.Mentions, v.goneMentioned)
	return p
}

// mentionsLeft returns mentions without the users gone names: mentions itself if it names none
// (a rendered post's, which is shared), else a new slice.
func mentionsLeft(mentions []string, gone map[string]bool) []string {
	if len(gone) == 0 || !slices.ContainsFunc(mentions, func(m string) bool { return gone[m] }) {
		return mentions
	}
	return slices.DeleteFunc(slices.Clone(mentions), func(m string) bool { return gone[m] })
}

// Post returns post id as the caller may see it: NotFound if it does not exist, was deleted, or is
// a followers post of an author the caller does not follow.
func (a *App) Post(ctx context.Context, id string) (rookery.Post, error) {
	const op rookery.Op = "app.Post"
	if !validPostID(id) {
		return rookery.Post{}, rookery.FieldErrors{{Name: "id", Reason: "is not a post id"}}.Err(op)
	}
	if _, err := caller(ctx, op); err != nil {
		return rookery.Post{}, err
	}
	it, err := a.table.Get(ctx, postKey(id))
	if rookery.IsKind(err, rookery.NotFound) {
		return rookery.Post{}, rookery.E(op, rookery.NotFound, "post not found")
	} else if err != nil {
		return rookery.Post{}, err
	}
	ps, err := a.hydrate(ctx, []table.Item{it})
	if err != nil {
		return rookery.Post{}, err
	}
	if len(ps) == 0 {
		return rookery.Post{}, rookery.E(op, rookery.NotFound, "post not found")
	}
	return ps[0], nil
}

// postAs returns post id as actor sees it, for actor to like or comment on: Forbidden if its
// author has blocked actor, NotFound if it does not exist or actor may not see it. It reads the post
// once.
func (a *App) postAs(ctx context.Context, op rookery.Op, id, actor string) (rookery.Post, error) {
	if !validPostID(id) {
		return rookery.Post{}, rookery.FieldErrors{{Name: "id", Reason: "is not a post id"}}.Err(op)
	}
	it, err := a.table.Get(ctx, postKey(id))
	if rookery.IsKind(err, rookery.NotFound) {
		return rookery.Post{}, rookery.E(op, rookery.NotFound, "post not found")
	} else if err != nil {
		return rookery.Post{}, err
	}
	if err := a.blockedBy(ctx, op, it.String("author_id"), actor); err != nil {
		return rookery.Post{}, err
	}
	// Visibility is the actor's, not merely that of a server token acting for them.
	ps, err := a.hydrate(rookery.WithCaller(ctx, rookery.Caller{UserID: actor}), []table.Item{it})
	if err != nil {
		return rookery.Post{}, err
	}
	if len(ps) == 0 {
		return rookery.Post{}, rookery.E(op, rookery.NotFound, "post not found")
	}
	return ps[0], nil
}

// postForWrite returns post id for a change by the caller: NotFound as Post says, Forbidden if the
// caller may see it but is not its author (or, when server is true, a server token).
func (a *App) postForWrite(ctx context.Context, op rookery.Op, id string, server bool) (table.Item, error) {
	p, err := a.Post(ctx, id)
	if err != nil {
		return nil, err
	}
	c, _ := rookery.CallerFrom(ctx)
	if !(c.Acting() == p.Author.ID || server && c.Server) {
		return nil, rookery.E(op, rookery.Forbidden, "only the author may change this post")
	}
	return a.table.Get(ctx, postKey(id))
}

// EditPost changes a post's text and tags (author only) and returns it with edited_at set.
func (a *App) EditPost(ctx context.Context, id string, e PostEdit) (rookery.Post, error) {
	const op rookery.Op = "app.EditPost"
	for range editAttempts {
		p, err := a.editOnce(ctx, op, id, e)
		if !errors.Is(err, errChanged) {
			return p, err
		}
	}
	return rookery.Post{}, rookery.E(op, rookery.Unavailable, "the post keeps changing; try again")
}

// editAttempts bounds the edits of a post that another write changed under them (editOnce).
const editAttempts = 50

// editOnce is one attempt of EditPost, on the post as it reads it: errChanged if the post changed
// before the edit committed (another edit, a count, an erasure's unmention), since the edit's
// writes follow from what it read (the tag items to delete and put, the untold mentions).
func (a *App) editOnce(ctx context.Context, op rookery.Op, id string, e PostEdit) (rookery.Post, error) {
	old, err := a.postForWrite(ctx, op, id, false)
	if err != nil {
		return rookery.Post{}, err
	}
	text, given := old.String("text"), []string(nil)
	var fe rookery.FieldErrors
	if e.Text != nil {
		text = *e.Text
		checkText(&fe, text)
	}
	if e.Tags != nil {
		given = *e.Tags
	} else {
		given = old.Strings("given_tags") // the text's hashtags are derived again below
	}
	tags := tagsOf(&fe, given, text)
	visibility := old.String("visibility")
	if e.Visibility != nil {
		visibility = *e.Visibility
		checkVisibility(&fe, visibility)
	}
	if err := fe.Err(op); err != nil {
		return rookery.Post{}, err
	}
	// An edit that changes nothing (an empty one, or a retry of one that was applied) is no edit:
	// the post is returned as it is, edited_at stays, and no PostEdited event tells anyone.
	if text == old.String("text") && visibility == old.String("visibility") && slices.Equal(givenTags(given), old.Strings("given_tags")) {
		return a.Post(ctx, id)
	}
	mentions, err := a.mentionsOf(ctx, op, old.String("author_id"), text)
	if err != nil {
		return rookery.Post{}, err
	}
	now := a.clock.Now().UTC().Truncate(time.Millisecond)
	created := time.UnixMilli(old.Int("created_at"))
	author := old.String("author_id")
	// The edit tells the users it mentions for the first time who can see the post and, when it
	// makes the post public, those the post mentioned before but could not tell. The others it
	// mentions and cannot tell are kept as the post's untold.
	oldMentions, oldUntold := old.Strings("mentions"), old.Strings("untold")
	var newMentions, tell, untold []string
	for _, m := range mentions {
		if !slices.Contains(oldMentions, m) {
			newMentions = append(newMentions, m)
		}
	}
	unseen, err := a.unseenBy(ctx, author, visibility, newMentions)
	if err != nil {
		return rookery.Post{}, err
	}
	for _, m := range mentions {
		switch {
		case slices.Contains(unseen, m):
			untold = append(untold, m)
		case slices.Contains(newMentions, m), slices.Contains(oldUntold, m) && visibility == rookery.Public:
			tell = append(tell, m)
		case slices.Contains(oldUntold, m):
			untold = append(untold, m)
		}
	}
	writes := []table.Write{table.UpdateWrite(postKey(id), table.Update{Set: map[string]any{
		"text": text, "tags": nonNil(tags), "given_tags": nonNil(givenTags(given)), "mentions": nonNil(mentions), "untold": nonNil(untold), "visibility": visibility, "edited_at": now.UnixMilli(),
	}, Add: map[string]int64{"rev": 1}}, table.Exists(table.PK), table.VersionIs("rev", old.Int("rev")))}
	oldTags := old.Strings("tags")
	for _, t := range oldTags {
		if !slices.Contains(tags, t) {
			writes = append(writes, table.ImmutableDeleteWrite(tagItem(id, t, author, created)))
		}
	}
	for _, t := range tags {
		if !slices.Contains(oldTags, t) {
			writes = append(writes, table.ImmutablePutWrite(tagItem(id, t, author, created)))
		}
	}
	ev, err := a.event(ctx, PostEdited, "post:"+id, PostPayload{PostID: id, AuthorID: author, Visibility: visibility, CreatedAt: rookery.Time{Time: created}, NewMentions: tell}, now)
	if err != nil {
		return rookery.Post{}, rookery.E(op, rookery.Internal, err)
	}
	err = a.writeWithEvent(ctx, writes, ev)
	a.posts.settle(ctx, a.table, id, postKey(id), err)
	if ce := (*table.ConditionError)(nil); errors.As(err, &ce) && ce.Index == 0 {
		return rookery.Post{}, errChanged // changed or deleted since it was read: read it again
	}
	if err != nil {
		return rookery.Post{}, err
	}
	return a.Post(ctx, id)
}

// DeletePost deletes a post (its author, or a server token): from then on it is in no list.
func (a *App) DeletePost(ctx context.Context, id string) error {
	const op rookery.Op = "app.DeletePost"
	old, err := a.postForWrite(ctx, op, id, true)
	if rookery.IsKind(err, rookery.NotFound) {
		// Perhaps the retry of a deletion that committed but never set its copy's tombstone (its
		// process stopped in between, or the cache failed): set it, if the post is gone indeed,
		// so that the feed stops showing the copy now, not after the cleanup consumer.
		if _, gerr := a.table.Get(ctx, postKey(id)); rookery.IsKind(gerr, rookery.NotFound) {
			a.posts.forget(ctx, id)
		}
	}
	if err != nil {
		return err
	}
	err = a.removePost(ctx, old)
	if rookery.IsKind(err, rookery.Conflict) {
		return rookery.E(op, rookery.NotFound, "post not found") // deleted meanwhile
	}
	return err
}

// removePost deletes post item old and its tags, with its PostDeleted event, and marks its id
// used (CreatePost): Conflict if it is gone already.
func (a *App) removePost(ctx context.Context, old table.Item) error {
	id, author, created := old.String("id"), old.String("author_id"), time.UnixMilli(old.Int("created_at")).UTC()
	gone := postGoneKey(id)
	writes := []table.Write{table.DeleteWrite(postKey(id), table.Exists(table.PK)),
		table.ImmutablePutWrite(table.Item{table.PK: gone.PK, table.SK: gone.SK, "post_id": id})}
	for _, t := range old.Strings("tags") {
		writes = append(writes, table.ImmutableDeleteWrite(tagItem(id, t, author, created)))
	}
	now := a.clock.Now().UTC().Truncate(time.Millisecond)
	ev, err := a.event(ctx, PostDeleted, "post:"+id, PostPayload{PostID: id, AuthorID: author, Visibility: old.String("visibility"),
		CreatedAt: rookery.Time{Time: created}}, now)
	if err != nil {
		return rookery.E("app.removePost", rookery.Internal, err)
	}
	err = a.writeWithEvent(ctx, writes, ev)
	a.recent.forget(author)
	a.posts.forget(ctx, id) // whatever err says: a write that timed out may have committed
	return err
}

// PostsByAuthor lists author's posts the caller may see, newest first.
func (a *App) PostsByAuthor(ctx context.Context, author, cursor string, limit int) (Page[rookery.Post], error) {
	const op rookery.Op = "app.PostsByAuthor"
	if err := checkList(op, author, limit); err != nil {
		return Page[rookery.Post]{}, err
	}
	if _, err := caller(ctx, op); err != nil {
		return Page[rookery.Post]{}, err
	}
	q := withCursor(postsByAuthorQuery(author), limit, cursor)
	if !a.billedReads {
		// The embedded store keeps an entry's attributes alone in this index (gsi1's projection):
		// the page's posts are read by id, from their copies where kept, as the home feed's are.
		// (DynamoDB's index holds whole posts, and reading them again by id would bill a read each.)
		q.Attributes = entryAttributes
	}
	page, err := a.table.Query(ctx, q)
	if err != nil {
		return Page[rookery.Post]{}, err
	}
	items := page.Items
	if !a.billedReads {
		ids := make([]string, len(items))
		for i, it := range items {
			ids[i] = it.String("id")
		}
		if items, err = a.postItems(ctx, ids); err != nil {
			return Page[rookery.Post]{}, err
		}
	}
	posts, err := a.hydrate(ctx, items)
	if err == nil && len(posts) == 0 {
		err = a.exists(ctx, op, author) // a deleted author's posts are hidden: none is shown
	}
	if err != nil {
		return Page[rookery.Post]{}, err
	}
	return Page[rookery.Post]{Items: posts, Next: page.Next}, nil
}

// postItems returns the posts of ids that exist, in ids' order: their copies where kept, the others
// read in batches (and kept).
func (a *App) postItems(ctx context.Context, ids []string) ([]table.Item, error) {
	items := make([]table.Item, len(ids))
	var keys []table.Key
	var at []int // the index in ids of each key read
	for i, c := range a.posts.get(ctx, ids) {
		if c.item != nil {
			items[i] = c.item
		} else {
			keys, at = append(keys, postKey(ids[i])), append(at, i)
		}
	}
	var read []table.Item
	for start := 0; start < len(keys); start += table.MaxBatchGet {
		got, err := a.table.BatchGet(ctx, keys[start:min(len(keys), start+table.MaxBatchGet)])
		if err != nil {
			return nil, err
		}
		for j, it := range got {
			if it != nil {
				items[at[start+j]], read = it, append(read, it)
			}
		}
	}
	a.posts.fill(ctx, read...)
	return slices.DeleteFunc(items, func(it table.Item) bool { return it == nil }), nil
}

// PostsByTag lists the posts with tag that the caller may see, newest first.
func (a *App) PostsByTag(ctx context.Context, tag, cursor string, limit int) (Page[rookery.Post], error) {
	const op rookery.Op = "app.PostsByTag"
	tag = normTag(tag)
	var fe rookery.FieldErrors
	if !validTag(tag) {
		fe.Add("tag", "a tag is 1 to 64 letters, digits or _")
	}
	checkLimit(&fe, limit)
	if err := fe.Err(op); err != nil {
		return Page[rookery.Post]{}, err
	}
	if _, err := caller(ctx, op); err != nil {
		return Page[rookery.Post]{}, err
	}
	q, err := a.table.Query(ctx, withCursor(postsByTagQuery(tag), limit, cursor))
	if err != nil {
		return Page[rookery.Post]{}, err
	}
	// The tag items point at posts; reading the posts themselves (consistently) drops deleted ones.
	keys := make([]table.Key, len(q.Items))
	for i, it := range q.Items {
		keys[i] = postKey(it.String("post_id"))
	}
	items, err := a.table.BatchGet(ctx, keys)
	if err != nil {
		return Page[rookery.Post]{}, err
	}
	items = slices.DeleteFunc(items, func(it table.Item) bool { return it == nil })
	posts, err := a.hydrate(ctx, items)
	return Page[rookery.Post]{Items: posts, Next: q.Next}, err
}
