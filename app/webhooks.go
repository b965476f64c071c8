package app

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/table"
)

// Webhooks: the app's backend registers endpoints (server-scope tokens only) and gets, for the
// event types each asks for, a signed POST per event (Standard Webhooks: webhook-id,
// webhook-timestamp, webhook-signature). The webhooks consumer turns each event of the log into a
// message and puts one delivery per subscribed, enabled endpoint into that endpoint's queue in the
// table (once per message: a marker per endpoint and message id, in the same transaction); package
// webhook delivers the queues, retrying over hours, and gives a delivery that keeps failing to the
// dead-letter queue of the webhooks group, whose replay puts it back in its queue.

// WebhooksGroup is the consumer group that queues webhook deliveries.
const WebhooksGroup = "webhooks"

// WebhookDelivery is the type of a dead-lettered delivery's event: replaying it (rookery dlq)
// queues the delivery again.
const WebhookDelivery = "WebhookDelivery"

// Webhook event types.
var WebhookTypes = []string{
	"post.created", "post.updated", "post.deleted", "follow.created", "follow.deleted", "like.created",
	"like.deleted", "comment.created", "comment.deleted", "notification.created", "streak.changed",
	"user.created", "user.updated", "user.deleted",
}

// webhookTest is the type of the message POST /v1/webhooks/{id}/test sends.
const webhookTest = "webhook.test"

// StreakMilestones are the streak lengths a streak.changed message names as a milestone.
var StreakMilestones = []int{7, 30, 100, 365}

const (
	// WebhookSecretGrace is how long a rotated-out secret still signs deliveries, beside the new one.
	WebhookSecretGrace = 24 * time.Hour
	// webhookMarkerTTL is how long a queued message's marker keeps its redelivery from queueing it
	// twice.
	webhookMarkerTTL = 7 * 24 * time.Hour
	maxWebhooks      = 100
)

// Webhook is a registered endpoint as the API shows it. Secret is shown when the endpoint is
// created and when it is rotated, never otherwise.
type Webhook struct {
	ID          string       `json:"id"`
	URL         string       `json:"url"`
	Events      []string     `json:"events"`
	Description string       `json:"description"`
	Enabled     bool         `json:"enabled"`
	Secret      string       `json:"secret,omitempty"`
	CreatedAt   rookery.Time `json:"created_at"`
}

// WebhookInput is the body of POST /v1/webhooks and PATCH /v1/webhooks/{id} (where every field is
// optional).
type WebhookInput struct {
	URL         *string   `json:"url"`
	Events      *[]string `json:"events"`
	Description *string   `json:"description"`
	Enabled     *bool     `json:"enabled"`
}

// WebhookPolicy says which URLs an endpoint may have. The zero value is the default: https only,
// to public addresses (checked again when connecting: package webhook).
type WebhookPolicy struct {
	AllowHTTP    bool // plain http (development and tests)
	AllowPrivate bool // loopback, private, link-local and other non-public addresses
}

// CheckURL returns why u may not be an endpoint's URL under p ("" if it may). A host name is
// checked when connecting, once it resolves; an address literal is checked here too.
func (p WebhookPolicy) CheckURL(u string) string {
	parsed, err := url.Parse(u)
	if err != nil || parsed.Host == "" || parsed.User != nil || len(u) > 2000 {
		return "must be an absolute http(s) URL without credentials, up to 2,000 characters"
	}
	switch {
	case parsed.Scheme == "https":
	case parsed.Scheme == "http" && p.AllowHTTP:
	case parsed.Scheme == "http":
		return "must be https (this server does not allow plain http: --webhooks-allow-http)"
	default:
		return "must be an http(s) URL"
	}
	host := parsed.Hostname()
	if addr, err := netip.ParseAddr(host); err == nil && !p.AllowPrivate && !PublicAddr(addr) {
		return "must be a public address (this server does not allow private ones: --webhooks-allow-private)"
	}
	if strings.EqualFold(host, "localhost") && !p.AllowPrivate {
		return "must be a public address (this server does not allow private ones: --webhooks-allow-private)"
	}
	return ""
}

// PublicAddr reports whether addr is a public unicast address: not loopback, private, link-local,
// multicast, unspecified, shared (100.64/10), benchmarking, documentation or reserved.
func PublicAddr(addr netip.Addr) bool {
	addr = addr.Unmap()
	if !addr.IsGlobalUnicast() || addr.IsPrivate() || addr.IsLoopback() || addr.IsLinkLocalUnicast() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(addr) {
			return false
		}
	}
	return true
}

var nonPublic = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{"0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15",
		"198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4", "64:ff9b::/96", "2001:db8::/32", "fc00::/7"} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// CreateWebhook registers an endpoint, with a new signing secret.
func (a *App) CreateWebhook(ctx context.Context, in WebhookInput) (Webhook, error) {
	const op rookery.Op = "app.CreateWebhook"
	if err := asServer(ctx, op); err != nil {
		return Webhook{}, err
	}
	var fe rookery.FieldErrors
	if in.URL == nil {
		fe.Add("url", "is required")
	}
	if in.Events == nil {
		fe.Add("events", "is required: the event types to deliver")
	}
	a.checkWebhookInput(&fe, in)
	if err := fe.Err(op); err != nil {
		return Webhook{}, err
	}
	existing, err := a.webhookItems(ctx)
	if err != nil {
		return Webhook{}, err
	}
	if len(existing) >= maxWebhooks {
		return Webhook{}, rookery.E(op, rookery.Conflict, "this server has 100 endpoints, the most it keeps")
	}
	secret, err := newWebhookSecret()
	if err != nil {
		return Webhook{}, rookery.E(op, rookery.Internal, err)
	}
	now := a.clock.Now().UTC().Truncate(time.Millisecond)
	id := "ep_" + a.ids()
	k := webhookKey(id)
	item := table.Item{table.PK: k.PK, table.SK: k.SK, "id": id, "url": *in.URL, "events": dedupe(*in.Events),
		"description": deref(in.Description), "enabled": in.Enabled == nil || *in.Enabled, "secret": secret,
		"created_at": now.UnixMilli()}
	err = a.table.Put(ctx, item, table.NotExists(table.PK))
	a.endpoints.forget()
	if err != nil {
		return Webhook{}, err
	}
	w := webhookOf(item)
	w.Secret = secret
	return w, nil
}

func (a *App) checkWebhookInput(fe *rookery.FieldErrors, in WebhookInput) {
	if in.URL != nil {
		if why := a.webhookPolicy.CheckURL(*in.URL); why != "" {
			fe.Add("url", why)
		}
	}
	if in.Events != nil {
		if len(*in.Events) == 0 {
			fe.Add("events", "must name at least one event type")
		}
		for _, t := range *in.Events {
			if !slices.Contains(WebhookTypes, t) {
				fe.Add("events", "unknown event type "+t+"; known: "+strings.Join(WebhookTypes, ", "))
				break
			}
		}
	}
	if in.Description != nil && len(*in.Description) > 500 {
		fe.Add("description", "must be at most 500 characters")
	}
}

// Webhooks lists the registered endpoints.
func (a *App) Webhooks(ctx context.Context) ([]Webhook, error) {
	const op rookery.Op = "app.Webhooks"
	if err := asServer(ctx, op); err != nil {
		return nil, err
	}
	items, err := a.webhookItems(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Webhook, 0, len(items))
	for _, it := range items {
		out = append(out, webhookOf(it))
	}
	return out, nil
}

// Webhook returns one endpoint.
func (a *App) Webhook(ctx context.Context, id string) (Webhook, error) {
	const op rookery.Op = "app.Webhook"
	if err := asServer(ctx, op); err != nil {
		return Webhook{}, err
	}
	it, err := a.webhookItem(ctx, op, id)
	if err != nil {
		return Webhook{}, err
	}
	return webhookOf(it), nil
}

// UpdateWebhook changes an endpoint's URL, event types, description or enabled state.
func (a *App) UpdateWebhook(ctx context.Context, id string, in WebhookInput) (Webhook, error) {
	const op rookery.Op = "app.UpdateWebhook"
	if err := asServer(ctx, op); err != nil {
		return Webhook{}, err
	}
	var fe rookery.FieldErrors
	a.checkWebhookInput(&fe, in)
	if err := fe.Err(op); err != nil {
		return Webhook{}, err
	}
	if _, err := a.webhookItem(ctx, op, id); err != nil {
		return Webhook{}, err
	}
	set := map[string]any{}
	if in.URL != nil {
		set["url"] = *in.URL
	}
	if in.Events != nil {
		set["events"] = dedupe(*in.Events)
	}
	if in.Description != nil {
		set["description"] = *in.Description
	}
	if in.Enabled != nil {
		set["enabled"] = *in.Enabled
	}
	if len(set) == 0 {
		return a.Webhook(ctx, id)
	}
	it, err := a.table.Update(ctx, webhookKey(id), table.Update{Set: set}, table.Exists(table.PK))
	a.endpoints.forget()
	if rookery.IsKind(err, rookery.Conflict) {
		return Webhook{}, rookery.E(op, rookery.NotFound, "webhook endpoint not found")
	} else if err != nil {
		return Webhook{}, err
	}
	return webhookOf(it), nil
}

// RotateWebhookSecret gives an endpoint a new secret. The old one goes on signing deliveries
// beside it for WebhookSecretGrace (a second signature in webhook-signature), so that the receiver
// can switch without losing a delivery.
func (a *App) RotateWebhookSecret(ctx context.Context, id string) (Webhook, error) {
	const op rookery.Op = "app.RotateWebhookSecret"
	if err := asServer(ctx, op); err != nil {
		return Webhook{}, err
	}
	cur, err := a.webhookItem(ctx, op, id)
	if err != nil {
		return Webhook{}, err
	}
	secret, err := newWebhookSecret()
	if err != nil {
		return Webhook{}, rookery.E(op, rookery.Internal, err)
	}
	until := a.clock.Now().Add(WebhookSecretGrace).UnixMilli()
	it, err := a.table.Update(ctx, webhookKey(id), table.Update{Set: map[string]any{
		"secret": secret, "prev_secret": cur.String("secret"), "prev_until": until,
	}}, table.Compare("secret", table.OpEq, cur.String("secret")))
	if rookery.IsKind(err, rookery.Conflict) {
		return Webhook{}, rookery.E(op, rookery.Conflict, "the endpoint changed meanwhile (rotated, or deleted); retry")
	} else if err != nil {
		return Webhook{}, err
	}
	w := webhookOf(it)
	w.Secret = secret
	return w, nil
}

// DeleteWebhook deletes an endpoint; what its queue still holds is dropped.
func (a *App) DeleteWebhook(ctx context.Context, id string) error {
	const op rookery.Op = "app.DeleteWebhook"
	if err := asServer(ctx, op); err != nil {
		return err
	}
	if _, err := a.webhookItem(ctx, op, id); err != nil {
		return err
	}
	err := a.table.Delete(ctx, webhookKey(id))
	a.endpoints.forget()
	if err != nil {
		return err
	}
	q := webhookQueueQuery(id)
	q.Limit = table.MaxQueryLimit
	q.KeysOnly = true
	return table.EachKeyPage(ctx, a.table, q, func(keys []table.Key) error {
		for _, k := range keys {
			if err := a.table.Delete(ctx, k); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestWebhook queues a webhook.test message to the endpoint (enabled or not) and returns its id.
func (a *App) TestWebhook(ctx context.Context, id string) (string, error) {
	const op rookery.Op = "app.TestWebhook"
	if err := asServer(ctx, op); err != nil {
		return "", err
	}
	if _, err := a.webhookItem(ctx, op, id); err != nil {
		return "", err
	}
	msgID := "msg_test_" + a.ids()
	now := a.clock.Now().UTC()
	body, err := webhookBody(webhookTest, now, map[string]string{"endpoint_id": id})
	if err != nil {
		return "", rookery.E(op, rookery.Internal, err)
	}
	return msgID, a.queueDelivery(ctx, id, msgID, webhookTest, body, now, true)
}

func (a *App) webhookItem(ctx context.Context, op rookery.Op, id string) (table.Item, error) {
	if !idOf(id, 80, "_-") {
		return nil, rookery.E(op, rookery.NotFound, "webhook endpoint not found")
	}
	it, err := a.table.Get(ctx, webhookKey(id))
	if rookery.IsKind(err, rookery.NotFound) {
		return nil, rookery.E(op, rookery.NotFound, "webhook endpoint not found")
	}
	return it, err
}

func (a *App) webhookItems(ctx context.Context) ([]table.Item, error) {
	var out []table.Item
	q := webhooksQuery()
	q.Limit = table.MaxQueryLimit
	err := table.EachPage(ctx, a.table, q, func(items []table.Item) error {
		out = append(out, items...)
		return nil
	})
	return out, err
}

func webhookOf(it table.Item) Webhook {
	return Webhook{ID: it.String("id"), URL: it.String("url"), Events: nonNil(it.Strings("events")),
		Description: it.String("description"), Enabled: it.Bool("enabled"),
		CreatedAt: rookery.Time{Time: time.UnixMilli(it.Int("created_at")).UTC()}}
}

func newWebhookSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b), nil
}

func dedupe(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// webhookBody is a message's body: {"type", "timestamp", "data"} (Standard Webhooks).
func webhookBody(typ string, at time.Time, data any) ([]byte, error) {
	return json.Marshal(struct {
		Type      string       `json:"type"`
		Timestamp rookery.Time `json:"timestamp"`
		Data      any          `json:"data"`
	}{typ, rookery.Time{Time: at.UTC()}, data})
}

// ApplyWebhooks is the webhooks consumer's handler: it turns an event into its message, if it has
// one, and queues a delivery to every enabled endpoint that asked for the message's type. A
// replayed dead letter (WebhookDelivery) is queued again to its endpoint.
func (a *App) ApplyWebhooks(ctx context.Context, ev rookery.Event) error {
	const op rookery.Op = "app.ApplyWebhooks"
	if ev.Type == WebhookDelivery {
		var d DeadDelivery
		if err := json.Unmarshal(ev.Payload, &d); err != nil {
			return rookery.E(op, rookery.Invalid, err)
		}
		if _, err := a.table.Get(ctx, webhookKey(d.Endpoint)); rookery.IsKind(err, rookery.NotFound) {
			return nil // deleted since
		} else if err != nil {
			return err
		}
		return a.queueDelivery(ctx, d.Endpoint, d.MessageID, d.Type, d.Body, a.clock.Now(), false) // an operator's replay: again
	}
	endpoints, err := a.webhookEndpoints(ctx, ev.OccurredAt.Time)
	if err != nil || !slices.ContainsFunc(endpoints, func(ep Webhook) bool { return ep.Enabled }) {
		return err // no message is made for nobody
	}
	msgs, err := a.webhookMessages(ctx, ev)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		var body []byte
		for _, ep := range endpoints {
			if !ep.Enabled || !slices.Contains(ep.Events, m.typ) {
				continue
			}
			if body == nil {
				if body, err = webhookBody(m.typ, ev.OccurredAt.Time, m.data); err != nil {
					return rookery.E(op, rookery.Internal, err)
				}
			}
			if err := a.queueDelivery(ctx, ep.ID, m.id, m.typ, body, a.clock.Now(), true); err != nil {
				return err
			}
		}
	}
	return nil
}

// webhookMsg is a message an event makes: its id (webhook-id), type and data.
type webhookMsg struct {
	id, typ string
	data    any
}

// webhookMessages returns the messages of ev: one (msg_<event id>) or none, but one per
// notification of a NotificationsCreated (msg_<event id>-<index>).
func (a *App) webhookMessages(ctx context.Context, ev rookery.Event) ([]webhookMsg, error) {
	if ev.Type != NotificationsCreated && ev.Type != NotificationCreated {
		typ, data, err := a.webhookMessage(ctx, ev)
		if err != nil || typ == "" {
			return nil, err
		}
		return []webhookMsg{{"msg_" + ev.ID, typ, data}}, nil
	}
	ns, err := notificationsOf(ev)
	if err != nil {
		return nil, rookery.E("app.webhookMessages", rookery.Invalid, "malformed event", err)
	}
	msgs := make([]webhookMsg, len(ns))
	actors := map[string]rookery.Author{} // one event's notifications share their actor
	for i, p := range ns {
		actor, ok := actors[p.Actor]
		if !ok {
			if actor, err = a.authorByID(ctx, p.Actor); err != nil {
				return nil, err
			}
			actors[p.Actor] = actor
		}
		n := Notification{ID: p.ID, Type: p.Type, Actor: actor, CreatedAt: p.At}
		if p.Post != "" {
			n.PostID = &p.Post
		}
		if p.Comment != "" {
			n.CommentID = &p.Comment
		}
		msgs[i] = webhookMsg{"msg_" + ev.ID, "notification.created", map[string]any{"user_id": p.Recipient, "notification": n}}
		if ev.Type == NotificationsCreated {
			msgs[i].id += "-" + strconv.Itoa(i)
		}
	}
	return msgs, nil
}

// endpointsSpacing is the least time between two reads of the endpoints for the webhooks consumer.
const endpointsSpacing = 50 * time.Millisecond

// webhookEndpoints returns the registered endpoints for an event that occurred at occurred, from a
// copy at most a second old (the consumer reads them for every event), read after the event
// occurred: so an endpoint made before the event gets its message. A process that is its table's
// only writer makes every change itself and forgets its copy then, so its copy is always current.
// Elsewhere API processes make the changes, and a copy read before the event occurred is read
// again (exact as far as the processes' clocks agree), at most every endpointsSpacing: events
// that come faster wait for the next read and share it, so a worker reads the endpoints at most
// 20 times a second, however many events it handles (a read each would cost a DynamoDB read an
// event).
func (a *App) webhookEndpoints(ctx context.Context, occurred time.Time) ([]Webhook, error) {
	if a.soleWriter {
		occurred = time.Time{}
	}
	return a.endpoints.getSince(occurred, a.clock.Now(), time.Second, endpointsSpacing, func() ([]Webhook, error) {
		items, err := a.webhookItems(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]Webhook, len(items))
		for i, it := range items {
			out[i] = webhookOf(it)
		}
		return out, nil
	})
}

// webhookMessage returns the webhook type and data of ev ("" if it has none), for an event that
// makes one message at most.
func (a *App) webhookMessage(ctx context.Context, ev rookery.Event) (string, any, error) {
	const op rookery.Op = "app.webhookMessage"
	bad := func(err error) (string, any, error) {
		return "", nil, rookery.E(op, rookery.Invalid, "malformed event", err)
	}
	switch ev.Type {
	case PostCreated, PostEdited:
		p, err := a.postPayload(ev)
		if err != nil {
			return bad(err)
		}
		typ := "post.created"
		if ev.Type == PostEdited {
			typ = "post.updated"
		}
		author, err := a.authorByID(ctx, p.AuthorID)
		if err != nil {
			return "", nil, err
		}
		it, err := a.table.Get(ctx, postKey(p.PostID))
		if rookery.IsKind(err, rookery.NotFound) {
			// Deleted since (its post.deleted follows): what the event says of it.
			post := rookery.Post{ID: p.PostID, Author: author, Visibility: p.Visibility, CreatedAt: p.CreatedAt,
				Tags: []string{}, Mentions: []string{}, Media: []rookery.Media{}}
			return typ, map[string]any{"post": post, "deleted": true}, nil
		} else if err != nil {
			return "", nil, err
		}
		post := postFromItem(it, author)
		gone, err := a.goneMentioned(ctx, post.Mentions)
		if err != nil {
			return "", nil, err
		}
		post.Mentions = mentionsLeft(post.Mentions, gone)
		return typ, map[string]any{"post": post}, nil
	case PostDeleted:
		p, err := a.postPayload(ev)
		if err != nil {
			return bad(err)
		}
		return "post.deleted", map[string]string{"post_id": p.PostID, "author_id": p.AuthorID}, nil
	case FollowCreated, FollowDeleted:
		var p FollowPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return bad(err)
		}
		typ := "follow.created"
		if ev.Type == FollowDeleted {
			typ = "follow.deleted"
		}
		return typ, p, nil
	case LikeCreated:
		var p LikePayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return bad(err)
		}
		return "like.created", map[string]any{"post_id": p.PostID, "post_author_id": p.AuthorID, "user_id": p.UserID, "liked_at": p.At}, nil
	case LikeDeleted:
		var p LikePayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return bad(err)
		}
		return "like.deleted", map[string]any{"post_id": p.PostID, "post_author_id": p.AuthorID, "user_id": p.UserID, "unliked_at": p.At}, nil
	case CommentCreated, CommentDeleted:
		var p CommentPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return bad(err)
		}
		if ev.Type == CommentDeleted {
			return "comment.deleted", p, nil
		}
		return "comment.created", p, nil
	case ActivityRecorded:
		var p ActivityPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return bad(err)
		}
		rec, err := a.loadStreak(ctx, op, p.UserID, false)
		if err != nil {
			return "", nil, err
		}
		data := map[string]any{"user_id": p.UserID, "activity": map[string]any{"type": p.Type, "points": p.Points, "date": p.Date},
			"streak": rec.view(a.clock.Now())}
		for _, m := range StreakMilestones {
			if p.StreakBefore < m && p.StreakAfter >= m {
				data["milestone"] = m
			}
		}
		return "streak.changed", data, nil
	case UserCreated, UserUpdated:
		var p UserPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return bad(err)
		}
		it, err := a.liveUser(ctx, p.UserID)
		if rookery.IsKind(err, rookery.NotFound) {
			return "", nil, nil
		} else if err != nil {
			return "", nil, err
		}
		typ := "user.created"
		if ev.Type == UserUpdated {
			typ = "user.updated"
		}
		return typ, map[string]any{"user": userFromItem(it)}, nil
	case UserDeleted:
		var p UserDeletedPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return bad(err)
		}
		return "user.deleted", map[string]any{"user_id": p.UserID, "deleted_at": p.At}, nil
	}
	return "", nil, nil
}

// queueDelivery puts a delivery of message msgID into endpoint's queue, due at due. With once, it
// does so unless it was queued before (its marker): a redelivered event queues nothing twice.
func (a *App) queueDelivery(ctx context.Context, endpoint, msgID, typ string, body []byte, due time.Time, once bool) error {
	k := webhookQueueKey(endpoint, due, msgID)
	writes := []table.Write{table.PutWrite(table.Item{table.PK: k.PK, table.SK: k.SK, "msg_id": msgID, "type": typ, "body": body,
		"attempts": int64(0), "queued_at": a.clock.Now().UnixMilli()})}
	if once {
		marker := webhookMarkerKey(endpoint, msgID)
		writes = append([]table.Write{table.PutWrite(table.Item{table.PK: marker.PK, table.SK: marker.SK,
			table.TTL: a.clock.Now().Add(webhookMarkerTTL).Unix()}, table.NotExists(table.PK))}, writes...)
	}
	err := a.table.TransactWrite(ctx, writes)
	var ce *table.ConditionError
	if errors.As(err, &ce) && ce.Index == 0 {
		return nil // queued before
	}
	if err == nil && a.onQueued != nil {
		a.onQueued(endpoint)
	}
	return err
}

// The queue, as package webhook's dispatcher works it (app.WebhookQueue).

// QueuedDelivery is one delivery in an endpoint's queue.
type QueuedDelivery struct {
	Endpoint  string
	MessageID string
	Type      string
	Body      []byte
	Attempts  int // failed attempts so far
	Due       time.Time
	Lease     int64 // the lease it was claimed with (ms); 0 if unclaimed
	QueuedAt  time.Time
	key       table.Key
}

// WebhookEndpoint is an endpoint as the dispatcher needs it: where, and the secrets to sign with.
type WebhookEndpoint struct {
	ID      string
	URL     string
	Enabled bool
	Secrets []string // the current secret, then a rotated-out one still in its grace
}

// WebhookEndpoints returns every endpoint for the dispatcher.
func (a *App) WebhookEndpoints(ctx context.Context) ([]WebhookEndpoint, error) {
	items, err := a.webhookItems(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]WebhookEndpoint, 0, len(items))
	for _, it := range items {
		out = append(out, a.endpointOf(it))
	}
	return out, nil
}

// WebhookEndpoint returns endpoint id as it is now (NotFound once deleted), so that an attempt
// goes where the endpoint is configured when it is made: a dispatcher's list of the endpoints may
// be seconds old.
func (a *App) WebhookEndpoint(ctx context.Context, id string) (WebhookEndpoint, error) {
	it, err := a.table.Get(ctx, webhookKey(id))
	if err != nil {
		return WebhookEndpoint{}, err
	}
	return a.endpointOf(it), nil
}

func (a *App) endpointOf(it table.Item) WebhookEndpoint {
	ep := WebhookEndpoint{ID: it.String("id"), URL: it.String("url"), Enabled: it.Bool("enabled"), Secrets: []string{it.String("secret")}}
	if prev := it.String("prev_secret"); prev != "" && it.Int("prev_until") > a.clock.Now().UnixMilli() {
		ep.Secrets = append(ep.Secrets, prev)
	}
	return ep
}

// DueDeliveries returns up to limit deliveries of endpoint due by now, oldest due first, that no
// dispatcher holds a lease on.
func (a *App) DueDeliveries(ctx context.Context, endpoint string, now time.Time, limit int) ([]QueuedDelivery, error) {
	q := webhookDueQuery(endpoint, now)
	q.Limit = min(limit*2, table.MaxQueryLimit)
	p, err := a.table.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	var out []QueuedDelivery
	for _, it := range p.Items {
		if it.Int("lease") > now.UnixMilli() {
			continue
		}
		due, _ := dueOfQueueKey(it.Key())
		out = append(out, QueuedDelivery{Endpoint: endpoint, MessageID: it.String("msg_id"), Type: it.String("type"),
			Body: it.Bytes("body"), Attempts: int(it.Int("attempts")), Due: due, Lease: it.Int("lease"),
			QueuedAt: time.UnixMilli(it.Int("queued_at")), key: it.Key()})
		if len(out) == limit {
			break
		}
	}
	return out, nil
}

// ClaimDeliveries takes a lease until until on each of ds it can, in one transaction when no other
// dispatcher took one of them first (else one at a time), and returns those it holds.
func (a *App) ClaimDeliveries(ctx context.Context, ds []QueuedDelivery, until time.Time) ([]QueuedDelivery, error) {
	ctx = table.WithoutSync(ctx) // a claim a crash loses lets the message go again: at least once
	lease := until.UnixMilli()
	claim := func(d QueuedDelivery) table.Write {
		cond := table.NotExists("lease")
		if d.Lease != 0 {
			cond = table.Compare("lease", table.OpEq, d.Lease)
		}
		return table.UpdateWrite(d.key, table.Update{Set: map[string]any{"lease": lease}}, table.Exists(table.PK), cond)
	}
	writes := make([]table.Write, len(ds))
	for i, d := range ds {
		writes[i] = claim(d)
	}
	err := a.table.TransactWrite(ctx, writes)
	if err == nil {
		for i := range ds {
			ds[i].Lease = lease
		}
		return ds, nil
	}
	if !rookery.IsKind(err, rookery.Conflict) {
		return nil, err
	}
	var held []QueuedDelivery
	for _, d := range ds {
		err := a.table.TransactWrite(ctx, []table.Write{claim(d)})
		switch {
		case err == nil:
			d.Lease = lease
			held = append(held, d)
		case !rookery.IsKind(err, rookery.Conflict):
			return held, err
		}
	}
	return held, nil
}

// DeliveryDone removes a delivered d from its queue (if this dispatcher still holds its lease).
func (a *App) DeliveryDone(ctx context.Context, d QueuedDelivery) error {
	// A removal a crash loses (unsynced) sends the message again, with its id: at least once.
	err := a.table.Delete(table.WithoutSync(ctx), d.key, table.Compare("lease", table.OpEq, d.Lease))
	if rookery.IsKind(err, rookery.Conflict) {
		return nil // another dispatcher took it over after the lease ran out: it delivers it again
	}
	return err
}

// RetryDelivery moves d to due at, counting the failed attempt.
func (a *App) RetryDelivery(ctx context.Context, d QueuedDelivery, at time.Time, lastErr string) error {
	k := webhookQueueKey(d.Endpoint, at, d.MessageID)
	err := a.table.TransactWrite(ctx, []table.Write{
		table.DeleteWrite(d.key, table.Compare("lease", table.OpEq, d.Lease)),
		table.PutWrite(table.Item{table.PK: k.PK, table.SK: k.SK, "msg_id": d.MessageID, "type": d.Type, "body": d.Body,
			"attempts": int64(d.Attempts + 1), "queued_at": d.QueuedAt.UnixMilli(), "last_error": lastErr}),
	})
	if rookery.IsKind(err, rookery.Conflict) {
		return nil // taken over: its new holder decides
	}
	return err
}

// DeadDelivery is a dead-lettered delivery (the payload of its WebhookDelivery event).
type DeadDelivery struct {
	Endpoint  string `json:"endpoint_id"`
	MessageID string `json:"msg_id"`
	Type      string `json:"type"`
	Body      []byte `json:"body"`
}

// DeadLetterDelivery gives d up: it leaves its queue for the webhooks group's dead-letter queue
// (rookery dlq list --group webhooks), whose replay queues it again.
func (a *App) DeadLetterDelivery(ctx context.Context, d QueuedDelivery, reason string) error {
	payload, err := json.Marshal(DeadDelivery{Endpoint: d.Endpoint, MessageID: d.MessageID, Type: d.Type, Body: d.Body})
	if err != nil {
		return err
	}
	ev := rookery.Event{ID: d.MessageID + "." + d.Endpoint, Type: WebhookDelivery, Version: 1, Key: "webhook:" + d.Endpoint,
		OccurredAt: rookery.Time{Time: d.QueuedAt.UTC()}, Payload: payload}
	dl := events.DeadLetter{Event: ev, Error: reason, Attempts: d.Attempts + 1, FailedAt: rookery.Time{Time: a.clock.Now().UTC()}}
	if err := a.events.DeadLetter(ctx, WebhooksGroup, dl); err != nil {
		return err
	}
	return a.DeliveryDone(ctx, d)
}
