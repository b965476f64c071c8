package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // IANA zones on every machine, whatever its zoneinfo
	"unicode"
	"unicode/utf8"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/streak"
	"github.com/rookery/rookery/table"
)

// UserInput is the body of PUT /v1/users/{id}.
type UserInput struct {
	Username    string  `json:"username"`
	DisplayName *string `json:"display_name"`
	Bio         *string `json:"bio"`
	TimeZone    *string `json:"timezone"`
}

// validate checks in and returns the values to store: display name defaults to the username, bio
// to "", time zone to UTC.
func (in UserInput) validate(op rookery.Op) (display, bio, tz string, err error) {
	var fe rookery.FieldErrors
	if !validUsername(in.Username) {
		fe.Add("username", "must be 3 to 30 characters of a-z, 0-9 and _")
	}
	display = in.Username
	if in.DisplayName != nil {
		display = *in.DisplayName
		// A display name is shown on one line, beside the username: it must show something, and
		// hold no line breaks or other control characters.
		if n := utf8.RuneCountInString(display); n < 1 || n > 64 || blank(display) || strings.ContainsFunc(display, unicode.IsControl) {
			fe.Add("display_name", "must be 1 to 64 characters, not only spaces, without control characters such as line breaks")
		}
	}
	if in.Bio != nil {
		bio = *in.Bio
		if utf8.RuneCountInString(bio) > 500 {
			fe.Add("bio", "must be at most 500 characters")
		}
	}
	tz = "UTC"
	if in.TimeZone != nil {
		tz = *in.TimeZone
		if !validTimeZone(tz) {
			fe.Add("timezone", "must be an IANA time zone such as Europe/Berlin")
		}
	}
	return display, bio, tz, fe.Err(op)
}

// validUsername: 3..30 of [a-z0-9_]; upper case letters are accepted and compared case-insensitively.
func validUsername(s string) bool { return len(s) >= 3 && idOf(s, 30, "_") }

func validTimeZone(tz string) bool {
	if tz == "" || tz == "Local" {
		return false
	}
	_, err := time.LoadLocation(tz)
	return err == nil
}

func validID(op rookery.Op, id string) error {
	if !rookery.ValidUserID(id) {
		return rookery.FieldErrors{{Name: "id", Reason: "must be 1 to 64 characters of A-Z, a-z, 0-9, _ and -"}}.Err(op)
	}
	return nil
}

// Events of users (for the webhooks).
const (
	UserCreated = "UserCreated"
	UserUpdated = "UserUpdated"
)

// UserPayload is the payload of UserCreated and UserUpdated, version 1.
type UserPayload struct {
	UserID string `json:"user_id"`
}

// PutUser creates user id (created is true) or replaces its profile. Only the user or a server
// token may. A username held by another user is Conflict; it is claimed with a conditional write,
// so two users racing for one name cannot both get it, and a changed username frees the old one in
// the same transaction.
func (a *App) PutUser(ctx context.Context, id string, in UserInput) (u rookery.User, created bool, err error) {
	const op rookery.Op = "app.PutUser"
	if err := validID(op, id); err != nil {
		return u, false, err
	}
	if err := actAs(ctx, op, id); err != nil {
		return u, false, err
	}
	display, bio, tz, err := in.validate(op)
	if err != nil {
		return u, false, err
	}
	defer a.gone.change(id)() // an id whose tombstone expired may be created again
	for attempt := 0; attempt < 5; attempt++ {
		cur, err := a.table.Get(ctx, userKey(id))
		switch {
		case rookery.IsKind(err, rookery.NotFound):
			cur = nil
		case err != nil:
			return u, false, err
		case userGone(cur):
			return u, false, rookery.E(op, rookery.Conflict, fmt.Sprintf("user %s was deleted; the id is free again from %s", id,
				time.Unix(cur.Int(table.TTL), 0).UTC().Format(time.RFC3339)))
		}
		now := a.clock.Now().UTC().Truncate(time.Millisecond)
		item := table.Item{
			table.PK: userKey(id).PK, table.SK: skMeta,
			"id": id, "username": in.Username, "display_name": display, "bio": bio, "timezone": tz,
			"created_at": now.UnixMilli(), "version": int64(1),
		}
		claim := table.Item{table.PK: usernameKey(in.Username).PK, table.SK: skMeta, "user_id": id}
		var writes []table.Write
		if cur == nil {
			writes = []table.Write{
				table.PutWrite(claim, table.NotExists(table.PK)),
				table.PutWrite(item, table.NotExists(table.PK)),
			}
		} else {
			version := cur.Int("version")
			for _, keep := range []string{"created_at", "follower_count", "following_count", "post_count"} {
				if v, ok := cur[keep]; ok {
					item[keep] = v
				}
			}
			item["version"] = version + 1
			oldName := cur.String("username")
			if usernameKey(oldName) == usernameKey(in.Username) {
				writes = []table.Write{
					table.PutWrite(claim),
					table.PutWrite(item, table.VersionIs("version", version)),
				}
			} else {
				writes = []table.Write{
					table.PutWrite(claim, table.NotExists(table.PK)),
					table.PutWrite(item, table.VersionIs("version", version)),
					table.DeleteWrite(usernameKey(oldName), table.Compare("user_id", table.OpEq, id)),
				}
			}
		}
		var zoned *streakRecord
		if cur != nil && cur.String("timezone") != tz {
			rec, w, err := a.zoneChange(ctx, id, cur.String("timezone"), tz, now)
			if err != nil {
				return u, false, err
			}
			zoned, writes = &rec, append(writes, w)
		}
		typ := UserCreated
		if cur != nil {
			typ = UserUpdated
		}
		ev, err := a.event(ctx, typ, "user:"+id, UserPayload{UserID: id}, now)
		if err != nil {
			return u, false, rookery.E(op, rookery.Internal, err)
		}
		err = a.writeWithEvent(ctx, writes, ev)
		var ce *table.ConditionError
		switch {
		case err == nil:
			if zoned != nil {
				a.cacheStreak(ctx, *zoned)
			}
			a.authors.keep(ctx, item)
			return userFromItem(item), cur == nil, nil
		case errors.As(err, &ce) && ce.Index == 0:
			return u, false, rookery.E(op, rookery.Conflict, "username is taken", err)
		case rookery.IsKind(err, rookery.Conflict):
			continue // the user changed under us: read again
		default:
			a.authors.forget(ctx, id) // a write that timed out may have committed
			return u, false, err
		}
	}
	return u, false, rookery.E(op, rookery.Conflict, "the user is being changed concurrently; retry")
}

// User returns user id. Any authenticated caller may read a profile. A missing user is NotFound.
func (a *App) User(ctx context.Context, id string) (rookery.User, error) {
	const op rookery.Op = "app.User"
	if err := validID(op, id); err != nil {
		return rookery.User{}, err
	}
	if _, err := caller(ctx, op); err != nil {
		return rookery.User{}, err
	}
	it, err := a.liveUser(ctx, id)
	if rookery.IsKind(err, rookery.NotFound) {
		return rookery.User{}, rookery.E(op, rookery.NotFound, "user not found")
	}
	if err != nil {
		return rookery.User{}, err
	}
	return userFromItem(it), nil
}

// UserByUsername returns the user who holds username (compared case-insensitively).
func (a *App) UserByUsername(ctx context.Context, username string) (rookery.User, error) {
	const op rookery.Op = "app.UserByUsername"
	if !validUsername(username) {
		return rookery.User{}, rookery.FieldErrors{{Name: "username", Reason: "must be 3 to 30 characters of a-z, 0-9 and _"}}.Err(op)
	}
	if _, err := caller(ctx, op); err != nil {
		return rookery.User{}, err
	}
	claim, err := a.table.Get(ctx, usernameKey(username))
	if rookery.IsKind(err, rookery.NotFound) || err == nil && userGone(claim) {
		return rookery.User{}, rookery.E(op, rookery.NotFound, "user not found")
	}
	if err != nil {
		return rookery.User{}, err
	}
	return a.User(ctx, claim.String("user_id"))
}

// usersOf reads the users that the attribute attr of items names, each once, in one batch read (a
// page's items: at most MaxBatchGet users): the authors to show, and which are deleted users,
// whose items a list does not show until the erasure has deleted them.
func (a *App) usersOf(ctx context.Context, items []table.Item, attr string) (authors map[string]rookery.Author, gone map[string]bool, err error) {
	authors, gone = map[string]rookery.Author{}, map[string]bool{}
	var keys []table.Key
	seen := map[string]bool{}
	for _, it := range items {
		if id := it.String(attr); !seen[id] {
			seen[id] = true
			keys = append(keys, userKey(id))
		}
	}
	if len(keys) == 0 {
		return authors, gone, nil
	}
	got, err := a.table.BatchGet(ctx, keys)
	if err != nil {
		return nil, nil, err
	}
	for _, u := range got {
		switch {
		case userGone(u):
			gone[u.String("id")] = true
		case u != nil:
			authors[u.String("id")] = authorOf(u)
		}
	}
	return authors, gone, nil
}

func userFromItem(it table.Item) rookery.User {
	return rookery.User{
		ID:             it.String("id"),
		Username:       it.String("username"),
		DisplayName:    it.String("display_name"),
		Bio:            it.String("bio"),
		TimeZone:       it.String("timezone"),
		CreatedAt:      rookery.Time{Time: time.UnixMilli(it.Int("created_at")).UTC()},
		FollowerCount:  it.Int("follower_count"),
		FollowingCount: it.Int("following_count"),
		PostCount:      it.Int("post_count"),
	}
}

// zoneChange returns user's streak record after a change of time zone at now, and its write
// (checked by version): day boundaries move from now on, and the change counts toward the limit of
// streak.MaxZoneChanges.
func (a *App) zoneChange(ctx context.Context, user, from, to string, now time.Time) (streakRecord, table.Write, error) {
	rec := streakRecord{User: user}
	it, err := a.table.Get(ctx, streakKey(user))
	switch {
	case err == nil:
		if rec, err = streakFromItem(it); err != nil {
			return rec, table.Write{}, rookery.E("app.zoneChange", rookery.Internal, "corrupt streak record", err)
		}
	case !rookery.IsKind(err, rookery.NotFound):
		return rec, table.Write{}, err
	}
	old := rec.Version
	rec.Zone, rec.Version = to, old+1
	rec.Changes = streak.KeepChanges(append(rec.Changes, streak.ZoneChange{At: now, From: from, To: to}), now)
	return rec, table.PutWrite(rec.item(a.eng.StreakShards), table.VersionIs("version", old)), nil
}
