package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
)

// Notification is a notification as the API shows it.
type Notification struct {
	ID        string         `json:"id"`
	Type      string         `json:"type"` // follow, like, comment, mention
	Actor     rookery.Author `json:"actor"`
	PostID    *string        `json:"post_id"`
	CommentID *string        `json:"comment_id"`
	CreatedAt rookery.Time   `json:"created_at"`
	Read      bool           `json:"read"`
}

// NotificationsCreated is the event of the notifications one event created (for the webhooks and
// the erasure checks), written in the transaction that creates them: one event for a post's
// mentions, not one each (each would be an outbox write, a log append and a delivery to each of
// its groups; docs/performance.md).
const NotificationsCreated = "NotificationsCreated"

// NotificationCreated is the event of one notification created, as earlier versions wrote it: read
// still (a log may hold some), written no more.
const NotificationCreated = "NotificationCreated"

// NotificationsPayload is the payload of NotificationsCreated, version 1.
type NotificationsPayload struct {
	Notifications []NotificationPayload `json:"notifications"`
}

// notificationsOf returns the notifications of a NotificationsCreated or NotificationCreated event.
func notificationsOf(ev rookery.Event) ([]NotificationPayload, error) {
	if ev.Type == NotificationCreated {
		var p NotificationPayload
		err := json.Unmarshal(ev.Payload, &p)
		return []NotificationPayload{p}, err
	}
	var p NotificationsPayload
	err := json.Unmarshal(ev.Payload, &p)
	return p.Notifications, err
}

// NotificationPayload is one notification of NotificationsCreated, and the payload of
// NotificationCreated, version 1.
type NotificationPayload struct {
	Recipient string       `json:"user_id"`
	ID        string       `json:"notification_id"`
	Type      string       `json:"type"`
	Actor     string       `json:"actor_id"`
	Post      string       `json:"post_id,omitempty"`
	Comment   string       `json:"comment_id,omitempty"`
	At        rookery.Time `json:"created_at"`
}

// NotificationsGroup is the consumer group that creates notifications.
const NotificationsGroup = "notifications"

// notice is one notification to create.
type notice struct {
	recipient, typ, actor, post, comment, ref string
	at                                        time.Time
}

// ApplyNotifications is the notifications consumer's handler. FollowCreated notifies the followee,
// LikeCreated and CommentCreated the post's author, PostCreated every user it mentions who could
// see it when it was written and PostEdited every such user it mentions for the first time;
// LikeDeleted and FollowDeleted remove the like's or the follow's notification if it is still
// unread. Nobody is notified of their own action or by a user they have blocked. It is idempotent:
// an event's notifications are created with its applied record, in one transaction
// (createNotices).
func (a *App) ApplyNotifications(ctx context.Context, ev rookery.Event) error {
	const op rookery.Op = "app.ApplyNotifications"
	var notices []notice
	at := ev.OccurredAt.Time
	switch ev.Type {
	case FollowCreated:
		var p FollowPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return rookery.E(op, rookery.Invalid, err)
		}
		notices = append(notices, notice{recipient: p.FolloweeID, typ: "follow", actor: p.FollowerID, ref: followRef(p.FollowerID), at: at})
	case FollowDeleted:
		var p FollowPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return rookery.E(op, rookery.Invalid, err)
		}
		return a.removeUnread(ctx, p.FolloweeID, followRef(p.FollowerID), p.At.Time)
	case LikeCreated:
		var p LikePayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return rookery.E(op, rookery.Invalid, err)
		}
		notices = append(notices, notice{recipient: p.AuthorID, typ: "like", actor: p.UserID, post: p.PostID, ref: likeRef(p.PostID, p.UserID), at: at})
	case LikeDeleted:
		var p LikePayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return rookery.E(op, rookery.Invalid, err)
		}
		return a.removeUnread(ctx, p.AuthorID, likeRef(p.PostID, p.UserID), p.At.Time)
	case CommentCreated:
		var p CommentPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return rookery.E(op, rookery.Invalid, err)
		}
		notices = append(notices, notice{recipient: p.PostOwner, typ: "comment", actor: p.AuthorID, post: p.PostID, comment: p.CommentID, at: at})
	case PostCreated:
		p, err := a.postPayload(ev)
		if err != nil {
			return rookery.E(op, rookery.Invalid, err)
		}
		if p.Notify != nil && len(*p.Notify) == 0 {
			return nil // it mentions no one who could see it: most posts, and no read
		}
		post, err := a.table.Get(ctx, postKey(p.PostID))
		if rookery.IsKind(err, rookery.NotFound) {
			return nil // deleted since
		} else if err != nil {
			return err
		}
		notify := post.Strings("mentions")
		if p.Notify != nil {
			notify = *p.Notify
		}
		for _, m := range notify {
			notices = append(notices, notice{recipient: m, typ: "mention", actor: p.AuthorID, post: p.PostID, at: at})
		}
	case PostEdited:
		p, err := a.postPayload(ev)
		if err != nil {
			return rookery.E(op, rookery.Invalid, err)
		}
		for _, m := range p.NewMentions {
			notices = append(notices, notice{recipient: m, typ: "mention", actor: p.AuthorID, post: p.PostID, at: at})
		}
	default:
		return nil
	}
	news, err := a.newNotices(ctx, ev.ID, notices)
	if err != nil {
		return err
	}
	if err := a.createNotices(ctx, ev.ID, news); err != nil {
		return err
	}
	return a.streamNotices(ctx, news)
}

// newNotice is a notification to create: the writes that create it (the first puts it) and its
// part of the NotificationsCreated event.
type newNotice struct {
	writes  []table.Write
	payload NotificationPayload
}

// createNotices creates news with the event's applied record and one NotificationsCreated event,
// all in one transaction: the record's condition is the one read that makes a redelivery create
// nothing twice (a condition on each notification read every key: a post's 3.5 mentions, on
// average, in the DeathStarBench texts), so the notifications are puts without reads. A notice is
// at most two writes and an event has at most maxMentions of them, so they fit one transaction.
func (a *App) createNotices(ctx context.Context, eventID string, news []newNotice) error {
	if len(news) == 0 {
		return nil
	}
	writes := []table.Write{a.appliedRecord(ctx, NotificationsGroup, eventID)}
	var p NotificationsPayload
	for _, nn := range news {
		writes, p.Notifications = append(writes, nn.writes...), append(p.Notifications, nn.payload)
	}
	if len(writes)+1 > table.MaxTransact {
		return rookery.E("app.createNotices", rookery.Internal, fmt.Sprintf("%d notifications do not fit one transaction", len(news)))
	}
	// Keyed by the actor, whom all of one event's notifications share.
	ev, err := a.event(ctx, NotificationsCreated, "notifications:"+news[0].payload.Actor, p, a.clock.Now())
	if err != nil {
		return err
	}
	err = a.writeWithEvent(ctx, writes, ev)
	if ce := (*table.ConditionError)(nil); errors.As(err, &ce) && ce.Index == 0 {
		return nil // applied before
	}
	return err
}

// streamNotices appends a notification event for each of news (created now or before) to its
// recipient's stream log, if they are present. A redelivered event appends nothing twice: the
// notification's id is the source.
func (a *App) streamNotices(ctx context.Context, news []newNotice) error {
	for _, nn := range news {
		it := nn.writes[0].Item
		recipient := recipientOf(it.Key())
		present, err := a.presentUsers(ctx, []string{recipient})
		if err != nil || len(present) == 0 {
			if err != nil {
				return err
			}
			continue
		}
		actor, err := a.authorByID(ctx, it.String("actor_id"))
		if err != nil {
			return err
		}
		unread, err := a.unreadCount(ctx, recipient)
		if err != nil {
			return err
		}
		data := NotificationEvent{Notification: notificationOf(it, actor), UnreadCount: unread}
		if err := a.appendStream(ctx, present, "notification:"+it.String("id"), StreamNotification, data); err != nil {
			return err
		}
	}
	return nil
}

// newNotices returns the notifications of notices to create: not those whose recipient is their
// actor or has blocked the actor (haveBlocked: an event's notices share their actor). The i-th
// notice's id is eventID's, with a suffix after the first (one event, several recipients:
// mentions), so that a redelivery gives each the same id whatever blocks changed since.
func (a *App) newNotices(ctx context.Context, eventID string, notices []notice) ([]newNotice, error) {
	var recipients []string
	var told []int // the notices recipients has, by index
	for i, n := range notices {
		if n.actor != notices[0].actor {
			return nil, rookery.E("app.newNotices", rookery.Internal, "an event's notices have more than one actor")
		}
		if n.recipient != "" && n.recipient != n.actor {
			recipients, told = append(recipients, n.recipient), append(told, i)
		}
	}
	if len(recipients) == 0 {
		return nil, nil
	}
	blocked, err := a.haveBlocked(ctx, recipients, notices[0].actor)
	if err != nil {
		return nil, err
	}
	var news []newNotice
	for j, i := range told {
		if blocked[j] {
			continue
		}
		n, id := notices[i], eventID
		if i > 0 {
			id = eventID + "-" + string(rune('a'+i%26))
		}
		news = append(news, noticeOf(id, n))
	}
	return news, nil
}

// noticeOf is notification n, with id, to create. Its put needs no condition (createNotices).
func noticeOf(id string, n notice) newNotice {
	k := notifKey(n.recipient, id)
	item := table.Item{table.PK: k.PK, table.SK: k.SK, "id": id, "type": n.typ, "actor_id": n.actor,
		"created_at": n.at.UnixMilli(), "read": false, gsi2.PK: unreadPK(n.recipient), gsi2.SK: id,
		gsi1.PK: notifiedByPK(n.actor), gsi1.SK: tsKey(n.at) + "#" + n.recipient + "#" + id}
	if n.post != "" {
		item["post_id"] = n.post
	}
	if n.comment != "" {
		item["comment_id"] = n.comment
	}
	writes := []table.Write{table.ImmutablePutWrite(item)}
	if n.ref != "" {
		r := notifRefKey(n.recipient, n.ref)
		writes = append(writes, table.PutWrite(table.Item{table.PK: r.PK, table.SK: r.SK, "sk": k.SK, "at": n.at.UnixMilli()}))
	}
	return newNotice{writes: writes, payload: NotificationPayload{Recipient: n.recipient, ID: id, Type: n.typ, Actor: n.actor,
		Post: n.post, Comment: n.comment, At: rookery.Time{Time: time.UnixMilli(n.at.UnixMilli()).UTC()}}}
}

// removeUnread deletes the notification of a like or a follow that was undone at undone (its ref),
// if it is still unread. The ref may already name a later like's or follow's notification: when
// the undo's handling comes late (its first delivery outlasted its ack wait, and its redelivery
// and the next like's or follow's ran meanwhile). That one stays, and so does its ref: only a
// notification made before the undo (or in its millisecond) goes, and only the ref that was read.
func (a *App) removeUnread(ctx context.Context, recipient, ref string, undone time.Time) error {
	r := notifRefKey(recipient, ref)
	it, err := a.table.Get(ctx, r)
	if rookery.IsKind(err, rookery.NotFound) {
		return nil
	} else if err != nil {
		return err
	}
	sk := it.String("sk")
	if at := it.Int("at"); at > undone.UnixMilli() { // a later one's (a ref from before "at" has none: older)
		return nil
	}
	theRef := table.Compare("sk", table.OpEq, sk)
	err = a.table.TransactWrite(ctx, []table.Write{
		table.DeleteWrite(table.Key{PK: r.PK, SK: sk}, table.Compare("read", table.OpEq, false)),
		table.DeleteWrite(r, theRef),
	})
	if rookery.IsKind(err, rookery.Conflict) {
		// Read already (or gone): it stays; only the ref goes, if it is still the one read.
		if err := a.table.Delete(ctx, r, theRef); err != nil && !rookery.IsKind(err, rookery.Conflict) {
			return err
		}
		return nil
	}
	return err
}

// Notifications lists the caller's notifications, newest first (only unread ones if unread).
func (a *App) Notifications(ctx context.Context, unread bool, cursor string, limit int) (Page[Notification], error) {
	const op rookery.Op = "app.Notifications"
	user, err := actingUser(ctx, op)
	if err != nil {
		return Page[Notification]{}, err
	}
	if err := limitErr(op, limit); err != nil {
		return Page[Notification]{}, err
	}
	if err := a.exists(ctx, op, user); err != nil {
		return Page[Notification]{}, err
	}
	q := withCursor(notificationsQuery(user), limit, cursor)
	if unread {
		q = withCursor(unreadQuery(user), limit, cursor)
	}
	p, err := a.table.Query(ctx, q)
	if err != nil {
		return Page[Notification]{}, err
	}
	actors, gone, err := a.usersOf(ctx, p.Items, "actor_id")
	if err != nil {
		return Page[Notification]{}, err
	}
	out := Page[Notification]{Items: make([]Notification, 0, len(p.Items)), Next: p.Next}
	for _, it := range p.Items {
		if !gone[it.String("actor_id")] { // a deleted user's, until the erasure deletes it
			out.Items = append(out.Items, notificationOf(it, actors[it.String("actor_id")]))
		}
	}
	return out, nil
}

// notificationOf is the notification item it as the API shows it.
func notificationOf(it table.Item, actor rookery.Author) Notification {
	n := Notification{ID: it.String("id"), Type: it.String("type"), Actor: actor,
		CreatedAt: rookery.Time{Time: time.UnixMilli(it.Int("created_at")).UTC()}, Read: it.Bool("read")}
	if v := it.String("post_id"); v != "" {
		n.PostID = &v
	}
	if v := it.String("comment_id"); v != "" {
		n.CommentID = &v
	}
	return n
}

// maxUnreadCount caps the unread count (shown as that many or more).
const maxUnreadCount = 1000

// UnreadCount counts the caller's unread notifications, up to maxUnreadCount.
func (a *App) UnreadCount(ctx context.Context) (int, error) {
	const op rookery.Op = "app.UnreadCount"
	user, err := actingUser(ctx, op)
	if err != nil {
		return 0, err
	}
	if err := a.exists(ctx, op, user); err != nil {
		return 0, err
	}
	return a.unreadCount(ctx, user)
}

func (a *App) unreadCount(ctx context.Context, user string) (int, error) {
	q := withLimit(unreadQuery(user), maxUnreadCount)
	q.KeysOnly = true
	p, err := a.table.Query(ctx, q)
	if err != nil {
		return 0, err
	}
	return len(p.Keys), nil
}

// MarkRead marks the caller's notifications with the given ids read, or all of them.
func (a *App) MarkRead(ctx context.Context, ids []string, all bool) error {
	const op rookery.Op = "app.MarkRead"
	user, err := actingUser(ctx, op)
	if err != nil {
		return err
	}
	if all == (len(ids) > 0) || len(ids) > 100 {
		return rookery.FieldErrors{{Name: "ids", Reason: "give up to 100 ids, or all: true"}}.Err(op)
	}
	if err := a.exists(ctx, op, user); err != nil {
		return err
	}
	if all {
		for range 100 { // at most 100 pages of 100 per request
			p, err := a.table.Query(ctx, withLimit(unreadQuery(user), 100))
			if err != nil {
				return err
			}
			if len(p.Items) == 0 {
				return nil
			}
			for _, it := range p.Items {
				ids = append(ids, it.String("id"))
			}
			if err := a.markRead(ctx, user, ids); err != nil {
				return err
			}
			ids = ids[:0]
		}
		return nil
	}
	for _, id := range ids {
		if !validNotifID(id) {
			return rookery.FieldErrors{{Name: "ids", Reason: "holds an id that is not a notification id"}}.Err(op)
		}
	}
	return a.markRead(ctx, user, ids)
}

// validNotifID: an event id, possibly with a -suffix: 1..80 letters, digits and -.
func validNotifID(id string) bool { return idOf(id, 80, "-") }

func (a *App) markRead(ctx context.Context, user string, ids []string) error {
	for _, id := range ids {
		_, err := a.table.Update(ctx, notifKey(user, id), table.Update{Set: map[string]any{"read": true}, Remove: leaveIndex(gsi2)}, table.Exists(table.PK))
		if err != nil && !rookery.IsKind(err, rookery.Conflict) { // an unknown id is skipped
			return err
		}
	}
	return nil
}
