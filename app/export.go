package app

import (
	"context"
	"strings"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
)

// ExportRecord is one record of a user's data export: Kind names what Data is.
type ExportRecord struct {
	Kind string `json:"kind"`
	Data any    `json:"data"`
}

// exportPage is how many records the export reads at a time: any size streams in pages.
const exportPage = 100

// Export hands emit everything Rookery holds about user (the user, or a server token), a page at a
// time, so an account of any size streams (GDPR art. 20): the profile; their posts (as they see
// them); their comments and likes (by the indexes of both); whom they follow and who follows them;
// their blocks and mutes; their notifications; their activities, daily points and streak. An error
// of emit ends it.
func (a *App) Export(ctx context.Context, user string, emit func(ExportRecord) error) error {
	const op rookery.Op = "app.Export"
	if !rookery.ValidUserID(user) {
		return rookery.FieldErrors{{Name: "id", Reason: "must be 1 to 64 characters of A-Z, a-z, 0-9, _ and -"}}.Err(op)
	}
	if err := actAs(ctx, op, user); err != nil {
		return err
	}
	as := rookery.WithCaller(ctx, rookery.Caller{UserID: user}) // reads as the user sees them
	u, err := a.User(as, user)
	if err != nil {
		return err
	}
	if err := emit(ExportRecord{"profile", u}); err != nil {
		return err
	}
	if err := exportPages(as, "post", func(c string) (Page[rookery.Post], error) { return a.PostsByAuthor(as, user, c, exportPage) }, emit); err != nil {
		return err
	}
	for _, q := range []struct {
		kind string
		q    table.Query
	}{
		{"comment", table.Query{Index: gsi1.Name, PK: commentsByPK(user)}},
		{"like", table.Query{Index: gsi1.Name, PK: likedByPK(user)}},
		{"block", table.Query{PK: blockKey(user, "").PK}},
		{"mute", table.Query{PK: muteKey(user, "").PK}},
	} {
		if err := a.exportItems(ctx, q.kind, q.q, emit); err != nil {
			return err
		}
	}
	if err := exportPages(as, "following", func(c string) (Page[Follow], error) { return a.Following(as, user, c, exportPage) }, emit); err != nil {
		return err
	}
	if err := exportPages(as, "follower", func(c string) (Page[Follow], error) { return a.Followers(as, user, c, exportPage) }, emit); err != nil {
		return err
	}
	if err := exportPages(as, "notification", func(c string) (Page[Notification], error) { return a.Notifications(as, false, c, exportPage) }, emit); err != nil {
		return err
	}
	if err := a.exportItems(ctx, "activity", table.Query{PK: actPK(user)}, emit); err != nil {
		return err
	}
	s, err := a.UserStreak(as, user)
	if err != nil {
		return err
	}
	return emit(ExportRecord{"streak", s})
}

// exportPages emits every item of a paged list as a record of kind.
func exportPages[T any](ctx context.Context, kind string, page func(cursor string) (Page[T], error), emit func(ExportRecord) error) error {
	for cursor := ""; ; {
		p, err := page(cursor)
		if err != nil {
			return err
		}
		for _, it := range p.Items {
			if err := emit(ExportRecord{kind, it}); err != nil {
				return err
			}
		}
		if p.Next == "" || ctx.Err() != nil {
			return ctx.Err()
		}
		cursor = p.Next
	}
}

// exportItems emits the stored attributes of every item q finds (but keys, index keys and expiry,
// which are the storage's, not the user's), with times (the attributes named *_at, stored as Unix
// milliseconds) in RFC 3339 as everywhere in the API: a daily points total is a record of kind
// "points_day", everything else of kind.
func (a *App) exportItems(ctx context.Context, kind string, q table.Query, emit func(ExportRecord) error) error {
	q.Limit = exportPage
	for {
		p, err := a.table.Query(ctx, q)
		if err != nil {
			return err
		}
		for _, it := range p.Items {
			k := kind
			if strings.HasPrefix(it.String(table.SK), dayPrefix) {
				k = "points_day"
			}
			data := map[string]any{}
			for name, v := range it {
				if name == table.PK || name == table.SK || name == table.TTL || strings.HasPrefix(name, "GSI") {
					continue
				}
				if ms, ok := v.(int64); ok && strings.HasSuffix(name, "_at") {
					v = rookery.Time{Time: time.UnixMilli(ms)}
				}
				data[name] = v
			}
			if q.Index == "" && (kind == "block" || kind == "mute") {
				data["user_id"] = it.String(table.SK) // the blocked or muted user
			}
			if err := emit(ExportRecord{k, data}); err != nil {
				return err
			}
		}
		if p.Next == "" {
			return nil
		}
		q.Cursor = p.Next
	}
}
