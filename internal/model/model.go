// Package model is a reference model of Rookery's social state, computed from first principles, for
// tests that drive the real service through HTTP and compare what it shows with what it should show
// (API.md): users, the follow graph, blocks and mutes, posts with their visibility, likes, comments,
// notifications, and from them every home feed, list and counter.
//
// The driver applies an action to the model only once the service acknowledged it, and asks the
// model beforehand whether the service must accept it (Can*). Times and ids come from the service's
// replies. A Model is not safe for concurrent use.
package model

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Pair is an ordered pair of users: follower and followee, blocker and blocked, muter and muted.
type Pair struct{ From, To string }

// Post is a post as the model keeps it.
type Post struct {
	ID, Author, Text string
	Followers        bool   // visibility "followers" (else "public")
	CreatedAt        string // as the API wrote it (RFC 3339 UTC with ms): sorts as time
	Mentions         []string
	Untold           []string // mentioned users the post could not tell (a followers post's non-followers)
	Deleted          bool
	Likes            map[string]bool
	Comments         []string // comment ids, oldest first
}

// Notice is a notification the model expects: to Recipient, of Type, by Actor, about Post and
// Comment ("" when none).
type Notice struct {
	Recipient, Type, Actor, Post, Comment string
	step                                  int // when its event happened
}

// Model is the whole state.
type Model struct {
	Follows, Blocks, Mutes map[Pair]bool
	users                  map[string]bool   // true while the user exists; false once deleted
	commentBy              map[string]string // comment id -> its author
	posts                  []*Post
	byID                   map[string]*Post
	notices                []Notice
	blocked                map[Pair][]int // the steps at which From blocked To
	step                   int
}

// New returns an empty model.
func New() *Model {
	return &Model{Follows: map[Pair]bool{}, Blocks: map[Pair]bool{}, Mutes: map[Pair]bool{}, users: map[string]bool{}, commentBy: map[string]string{},
		byID: map[string]*Post{}, blocked: map[Pair][]int{}}
}

// AddUser records a user whose username is their id.
func (m *Model) AddUser(id string) { m.users[id] = true }

// Gone reports whether user id was deleted (DeleteUser).
func (m *Model) Gone(id string) bool { exists, known := m.users[id]; return known && !exists }

// DeleteUser records that account u was deleted: from then on nothing of u's shows anywhere. Their
// posts are deleted with the likes and comments others left on them (a post u had deleted before
// keeps those, as anyone's deleted post does: no index leads to it); their follows (both ways),
// blocks and mutes (both ways), likes and comments are gone, and so is every notification they
// caused or received. A deleted user's name mentions nobody.
func (m *Model) DeleteUser(u string) {
	m.users[u] = false
	for _, rel := range []map[Pair]bool{m.Follows, m.Blocks, m.Mutes} {
		for p := range rel {
			if p.From == u || p.To == u {
				delete(rel, p)
			}
		}
	}
	for _, p := range m.posts {
		if p.Author == u && !p.Deleted { // erased with what others left on it
			p.Deleted, p.Likes, p.Comments = true, map[string]bool{}, nil
		}
		delete(p.Likes, u)
		p.Comments = slices.DeleteFunc(p.Comments, func(c string) bool { return m.commentBy[c] == u })
	}
	m.notices = slices.DeleteFunc(m.notices, func(n Notice) bool { return n.Actor == u || n.Recipient == u })
}

// Post returns the post with id, or nil.
func (m *Model) Post(id string) *Post { return m.byID[id] }

// Posts returns every post ever made, deleted ones too, in the order they were made.
func (m *Model) Posts() []*Post { return m.posts }

func (m *Model) tick() int { m.step++; return m.step }

// blockedEither reports whether a and b are separated by a block, either way.
func (m *Model) blockedEither(a, b string) bool { return m.Blocks[Pair{a, b}] || m.Blocks[Pair{b, a}] }

// CanFollow reports whether a may follow b.
func (m *Model) CanFollow(a, b string) bool { return a != b && m.users[b] && !m.blockedEither(a, b) }

// Follow records that a follows b (a repeat changes nothing).
func (m *Model) Follow(a, b string) {
	if m.Follows[Pair{a, b}] {
		return
	}
	m.Follows[Pair{a, b}] = true
	m.notify(b, "follow", a, "", "")
}

// Unfollow records that a no longer follows b: b's notification of the follow goes (nobody
// reads them here, so it is unread).
func (m *Model) Unfollow(a, b string) {
	if m.Follows[Pair{a, b}] {
		delete(m.Follows, Pair{a, b})
		m.unnotify("follow", a, b, "")
	}
}

// Block records that a blocked b: follows go both ways, as Unfollow.
func (m *Model) Block(a, b string) {
	m.Blocks[Pair{a, b}] = true
	m.Unfollow(a, b)
	m.Unfollow(b, a)
	m.blocked[Pair{a, b}] = append(m.blocked[Pair{a, b}], m.tick())
}

// Unblock records that a no longer blocks b.
func (m *Model) Unblock(a, b string) { delete(m.Blocks, Pair{a, b}) }

// Mute and Unmute record that a muted, or no longer mutes, b.
func (m *Model) Mute(a, b string)   { m.Mutes[Pair{a, b}] = true }
func (m *Model) Unmute(a, b string) { delete(m.Mutes, Pair{a, b}) }

// mentionsOf returns the users author's text mentions, each once, in order: an @ at the start or
// after a character that is not a letter, mark, digit, _, @, . or / (so not in an email address or
// a URL), then a whole name of 3 to 30 of A-Z, a-z, 0-9 and _, of a user author has not blocked.
func (m *Model) mentionsOf(author, text string) []string {
	var out []string
	for i := 0; i < len(text); i++ {
		if text[i] != '@' {
			continue
		}
		if prev, _ := utf8.DecodeLastRuneInString(text[:i]); i > 0 && (unicode.IsLetter(prev) || unicode.IsMark(prev) ||
			unicode.IsDigit(prev) || strings.ContainsRune("_@./", prev)) {
			continue
		}
		j := i + 1
		for j < len(text) && (text[j] == '_' || text[j] >= '0' && text[j] <= '9' || text[j]|0x20 >= 'a' && text[j]|0x20 <= 'z') {
			j++
		}
		if n := j - i - 1; n >= 3 && n <= 30 {
			if u := strings.ToLower(text[i+1 : j]); m.users[u] && !m.Blocks[Pair{author, u}] && !slices.Contains(out, u) {
				out = append(out, u)
			}
		}
	}
	return out
}

// CanWrite reports whether author may post or edit to text: nobody it mentions has blocked them.
func (m *Model) CanWrite(author, text string) bool {
	for _, u := range m.mentionsOf(author, text) {
		if m.Blocks[Pair{u, author}] {
			return false
		}
	}
	return true
}

// CreatePost records a post the service created.
func (m *Model) CreatePost(id, author, text string, followers bool, createdAt string) *Post {
	p := &Post{ID: id, Author: author, Text: text, Followers: followers, CreatedAt: createdAt,
		Mentions: m.mentionsOf(author, text), Likes: map[string]bool{}}
	m.posts = append(m.posts, p)
	m.byID[id] = p
	for _, u := range p.Mentions {
		if m.seesWhenWritten(u, p) {
			m.notify(u, "mention", author, id, "")
		} else {
			p.Untold = append(p.Untold, u)
		}
	}
	return p
}

// seesWhenWritten reports whether a user post p mentions is told of it: one who can see it (a
// followers post's mentions of users who do not follow its author tell them nothing).
func (m *Model) seesWhenWritten(u string, p *Post) bool {
	return !p.Followers || u == p.Author || m.Follows[Pair{u, p.Author}]
}

// ToldOfMention reports whether u is told of a mention by post p, which was just written: p
// mentions u (the author has not blocked them) and u can see it.
func (m *Model) ToldOfMention(u string, p *Post) bool {
	return u != p.Author && slices.Contains(p.Mentions, u) && m.seesWhenWritten(u, p)
}

// Edit records a new text and visibility of post id: its mentions are the new text's. Users it did
// not mention before are notified if they can see it; so are, when it becomes public, those it
// mentioned before but could not tell.
func (m *Model) Edit(id, text string, followers bool) {
	p := m.byID[id]
	mentions := m.mentionsOf(p.Author, text)
	p.Followers = followers
	var untold []string
	for _, u := range mentions {
		switch {
		case !slices.Contains(p.Mentions, u) && !m.seesWhenWritten(u, p):
			untold = append(untold, u)
		case !slices.Contains(p.Mentions, u) || slices.Contains(p.Untold, u) && !followers:
			m.notify(u, "mention", p.Author, id, "")
		case slices.Contains(p.Untold, u):
			untold = append(untold, u)
		}
	}
	p.Mentions, p.Text, p.Untold = mentions, text, untold
}

// Delete records that post id was deleted.
func (m *Model) Delete(id string) { m.byID[id].Deleted = true }

// CanSee reports whether viewer may see post p anywhere (and so like, unlike or comment on it).
func (m *Model) CanSee(viewer string, p *Post) bool {
	switch {
	case p.Deleted || m.blockedEither(viewer, p.Author):
		return false
	case p.Followers:
		return viewer == p.Author || m.Follows[Pair{viewer, p.Author}]
	}
	return true
}

// Like records that user likes post id (a repeat changes nothing).
func (m *Model) Like(id, user string) {
	p := m.byID[id]
	if p.Likes[user] {
		return
	}
	p.Likes[user] = true
	m.notify(p.Author, "like", user, id, "")
}

// Unlike records that user no longer likes post id; the like's notification, never read here, goes.
func (m *Model) Unlike(id, user string) {
	p := m.byID[id]
	if !p.Likes[user] {
		return
	}
	delete(p.Likes, user)
	m.unnotify("like", user, p.Author, id)
}

// unnotify removes the latest notification of typ by actor to recipient about post: an undone
// like's or follow's.
func (m *Model) unnotify(typ, actor, recipient, post string) {
	for i := len(m.notices) - 1; i >= 0; i-- {
		if n := m.notices[i]; n.Type == typ && n.Actor == actor && n.Recipient == recipient && n.Post == post {
			m.notices = slices.Delete(m.notices, i, i+1)
			return
		}
	}
}

// Comment records comment cid by user on post id.
func (m *Model) Comment(id, user, cid string) {
	p := m.byID[id]
	p.Comments = append(p.Comments, cid)
	m.commentBy[cid] = user
	m.notify(p.Author, "comment", user, id, cid)
}

func (m *Model) notify(recipient, typ, actor, post, comment string) {
	if recipient == actor {
		return // nobody is notified of their own actions
	}
	m.notices = append(m.notices, Notice{Recipient: recipient, Type: typ, Actor: actor, Post: post, Comment: comment, step: m.tick()})
}

// Feed is user u's whole home feed: the ids of the posts of everyone u follows and u's own, newest
// first by (created_at, id), without deleted, muted, blocked or (followers-only) invisible posts.
func (m *Model) Feed(u string) []string {
	var ps []*Post
	for _, p := range m.posts {
		a := p.Author
		switch {
		case p.Deleted:
		case a != u && !m.Follows[Pair{u, a}]:
		case a != u && (m.Mutes[Pair{u, a}] || m.blockedEither(u, a)):
		default:
			ps = append(ps, p)
		}
	}
	return ids(newestFirst(ps))
}

// AuthorPosts are u's posts that are not deleted, newest first, as u lists them.
func (m *Model) AuthorPosts(u string) []*Post {
	var ps []*Post
	for _, p := range m.posts {
		if p.Author == u && !p.Deleted {
			ps = append(ps, p)
		}
	}
	return newestFirst(ps)
}

func newestFirst(ps []*Post) []*Post {
	slices.SortFunc(ps, func(x, y *Post) int {
		if c := strings.Compare(y.CreatedAt, x.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(y.ID, x.ID)
	})
	return ps
}

func ids(ps []*Post) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}

// Following and Followers are the users u follows and who follow u, sorted.
func (m *Model) Following(u string) []string {
	return edgesOf(m.Follows, func(p Pair) (bool, string) { return p.From == u, p.To })
}
func (m *Model) Followers(u string) []string {
	return edgesOf(m.Follows, func(p Pair) (bool, string) { return p.To == u, p.From })
}

// Blocking and Muting are the users u blocks and mutes, sorted.
func (m *Model) Blocking(u string) []string {
	return edgesOf(m.Blocks, func(p Pair) (bool, string) { return p.From == u, p.To })
}
func (m *Model) Muting(u string) []string {
	return edgesOf(m.Mutes, func(p Pair) (bool, string) { return p.From == u, p.To })
}

// edgesOf returns the other ends of the pairs in set that pick picks, sorted.
func edgesOf(set map[Pair]bool, pick func(Pair) (bool, string)) []string {
	out := []string{}
	for p := range set {
		if ok, other := pick(p); ok {
			out = append(out, other)
		}
	}
	slices.Sort(out)
	return out
}

// PostCount is how many of u's posts are not deleted.
func (m *Model) PostCount(u string) int { return len(m.AuthorPosts(u)) }

// Notifications returns the notifications u must have (required) and those u may have or not
// (optional): one whose recipient blocked its actor after it happened (the worker checks the block
// when it handles the event), and a mention in a post deleted since (the worker skips it).
func (m *Model) Notifications(u string) (required, optional []Notice) {
	for _, n := range m.notices {
		if n.Recipient != u {
			continue
		}
		late := slices.ContainsFunc(m.blocked[Pair{n.Recipient, n.Actor}], func(s int) bool { return s > n.step })
		if late || n.Type == "mention" && m.byID[n.Post].Deleted {
			optional = append(optional, n)
		} else {
			required = append(required, n)
		}
	}
	return required, optional
}

// exportID names, for each kind of record of a data export (GET /v1/users/{id}/export) that the
// model keeps, the field of its data that identifies it.
var exportID = map[string]string{"post": "id", "comment": "id", "like": "post_id", "following": "user_id",
	"follower": "user_id", "block": "user_id", "mute": "user_id"}

// Export returns what u's data export must hold of the kinds the model keeps: kind -> ids, posts
// newest first and the rest sorted (ExportOf reads an export so).
func (m *Model) Export(u string) map[string][]string {
	out := map[string][]string{"post": ids(m.AuthorPosts(u)), "following": m.Following(u), "follower": m.Followers(u),
		"comment": {}, "like": {}, "block": {}, "mute": {}}
	for _, p := range m.posts {
		if p.Likes[u] {
			out["like"] = append(out["like"], p.ID)
		}
		for _, c := range p.Comments {
			if m.commentBy[c] == u {
				out["comment"] = append(out["comment"], c)
			}
		}
	}
	for kind, rel := range map[string]map[Pair]bool{"block": m.Blocks, "mute": m.Mutes} {
		for p := range rel {
			if p.From == u {
				out[kind] = append(out[kind], p.To)
			}
		}
	}
	for kind, l := range out {
		if kind != "post" {
			slices.Sort(l)
		}
	}
	return out
}

// ExportOf reads a data export's JSON lines into what Export returns: the ids of the records of the
// kinds the model keeps (others are skipped). It fails unless the last line is the end record
// counting every record.
func ExportOf(body string) (map[string][]string, error) {
	out := map[string][]string{}
	for kind := range exportID {
		out[kind] = []string{}
	}
	lines := strings.Split(strings.TrimSpace(body), "\n")
	for i, line := range lines {
		var rec struct {
			Kind string         `json:"kind"`
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			return nil, fmt.Errorf("export line %d is not a record: %q", i+1, line)
		}
		if rec.Kind == "end" {
			if n, _ := rec.Data["records"].(float64); i != len(lines)-1 || int(n) != i {
				return nil, fmt.Errorf("export ends with %q after %d records", line, i)
			}
			for kind, l := range out {
				if kind != "post" {
					slices.Sort(l)
				}
			}
			return out, nil
		}
		if field, ok := exportID[rec.Kind]; ok {
			id, _ := rec.Data[field].(string)
			out[rec.Kind] = append(out[rec.Kind], id)
		}
	}
	return nil, fmt.Errorf("export without its end record (%d lines)", len(lines))
}
