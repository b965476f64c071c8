// Package sqs is the event log on Amazon SNS and SQS, the pipeline the seeds draw: the relay
// publishes to one SNS FIFO topic; each consumer group reads its own SQS FIFO queue, subscribed to
// the topic with a filter policy on the event type, with a dead-letter queue behind a redrive policy.
//
// Layout, for a deployment prefix P:
//
//	topic  P-events.fifo          every event; message group = the event's key, de-duplication id =
//	                              the event's id, attribute "type" = its type; the body is its JSON
//	queue  P-<group>.fifo         the group's events (raw delivery; the filter policy of the group's
//	                              types, if it names them); redrive to the DLQ after MaxReceives
//	queue  P-<group>-dlq.fifo     the group's dead letters
//
// Order per key comes from FIFO message groups: SQS hands out a message group's next message only
// once the one before it is deleted (acked). A process holds every message it received in a buffer
// per message group, hands out a group's head only, and advances once the head is deleted, so its
// consumers keep that order too.
//
// The ack wait is the queue's visibility timeout, rounded up to whole seconds (SQS's unit): a
// buffered message's visibility is extended every third of it, and a handed-out message's up to its
// ack wait from the hand-out, so a message comes back to the group only when its holder died or its
// handler overran the ack wait. A nak is a change of visibility to the delay.
//
// A group sees the events published after its queue was subscribed: Migrate (rookery migrate)
// creates every group the application runs, so none misses an event; Subscribe creates a group it
// does not know on first use.
package sqs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/internal/awsconf"
)

// Options configure a Log.
type Options struct {
	AWS awsconf.Options // the endpoint (one for SNS and SQS, as emulators have), region, keys
	// Prefix names the topic and queues (one deployment, or one test): letters, digits, - and _,
	// at most 20.
	Prefix string
	// Groups are the consumer groups to create at Open with the event types each receives (nil: every
	// type). A group missing here is created when first subscribed, with every type.
	Groups map[string][]string
	// MaxReceives is the redrive policy's maxReceiveCount: a message received this many times
	// without being deleted (its consumers crashed on it each time) moves to the DLQ. 0 means 20;
	// the runner dead-letters failing events itself after its MaxAttempts, before this.
	MaxReceives int
	// WaitTime is the long poll of a receive; 0 means 10 s (SQS allows up to 20). Stopping a consumer
	// waits for its poll to end.
	WaitTime time.Duration
	// PublishBatch is how many events go in one SNS PublishBatch; 0 means 10 (SNS's most). The
	// emulator the tests use (fauxqs 2.4.1) reorders a batch of 10 (it reads the entries in the order
	// of their form keys, member.10 before member.2): its tests use 9.
	PublishBatch int
	// Buffer is how many received messages a process holds per group at most; 0 means 40.
	Buffer int
	Logger *slog.Logger
}

// Log is events.Log on SNS and SQS.
type Log struct {
	sns      *sns.Client
	sqs      *awssqs.Client
	prefix   string
	topicARN string
	o        Options
	log      *slog.Logger

	mu      sync.Mutex
	queues  map[string]*queue  // by group: created or looked up
	members map[string]*member // by group: this process's subscriptions
	closed  bool
	scanMu  sync.Mutex // one dead-letter scan at a time (deadletters.go)

	reqMu    sync.Mutex
	requests map[string]int64 // API requests made, by operation (Requests)
}

// queue is a consumer group's pair of queues.
type queue struct {
	url, arn string
	dlqURL   string
}

var _ events.Log = (*Log)(nil)

// Open connects and creates (idempotently) the topic and the queues of o.Groups.
func Open(ctx context.Context, o Options) (*Log, error) {
	const op rookery.Op = "sqs.Open"
	if o.MaxReceives <= 0 {
		o.MaxReceives = 20
	}
	if o.WaitTime <= 0 {
		o.WaitTime = 10 * time.Second
	}
	if o.PublishBatch <= 0 || o.PublishBatch > 10 {
		o.PublishBatch = 10
	}
	if o.Buffer <= 0 {
		o.Buffer = 40
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Prefix == "" || len(o.Prefix) > 20 || !rookery.ValidUserID(o.Prefix) {
		return nil, rookery.E(op, rookery.Invalid, "a prefix of 1 to 20 letters, digits, - and _ is required")
	}
	cfg, err := awsconf.Load(ctx, o.AWS)
	if err != nil {
		return nil, rookery.E(op, rookery.Invalid, "AWS configuration", err)
	}
	l := &Log{prefix: o.Prefix, o: o, log: o.Logger, queues: map[string]*queue{}, members: map[string]*member{}, requests: map[string]int64{}}
	l.sns = sns.NewFromConfig(cfg, func(so *sns.Options) {
		if o.AWS.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.AWS.Endpoint)
		}
		so.APIOptions = append(so.APIOptions, l.countRequests)
	})
	l.sqs = awssqs.NewFromConfig(cfg, func(so *awssqs.Options) {
		if o.AWS.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.AWS.Endpoint)
		}
		so.APIOptions = append(so.APIOptions, l.countRequests)
	})
	topic, err := l.sns.CreateTopic(ctx, &sns.CreateTopicInput{
		Name:       aws.String(o.Prefix + "-events.fifo"),
		Attributes: map[string]string{"FifoTopic": "true", "ContentBasedDeduplication": "false"},
	})
	if err != nil {
		return nil, translate(op, err)
	}
	l.topicARN = aws.ToString(topic.TopicArn)
	for g, types := range o.Groups {
		if _, err := l.createGroup(ctx, g, types); err != nil {
			return nil, rookery.E(op, err)
		}
	}
	return l, nil
}

// countRequests counts every API request by its operation (retries are one request each).
func (l *Log) countRequests(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("rookeryCount", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
		l.reqMu.Lock()
		l.requests[awsmiddleware.GetServiceID(ctx)+"."+awsmiddleware.GetOperationName(ctx)]++
		l.reqMu.Unlock()
		return next.HandleFinalize(ctx, in)
	}), middleware.After)
}

// Requests returns how many API requests this Log made, by service and operation (for instance
// "SQS.ReceiveMessage"): what SNS and SQS bill.
func (l *Log) Requests() map[string]int64 {
	l.reqMu.Lock()
	defer l.reqMu.Unlock()
	out := make(map[string]int64, len(l.requests))
	for k, v := range l.requests {
		out[k] = v
	}
	return out
}

// Destroy deletes the topic and every queue this Log created or used (tests).
func (l *Log) Destroy(ctx context.Context) error {
	l.Close()
	var errs []error
	l.mu.Lock()
	qs := l.queues
	l.mu.Unlock()
	for _, q := range qs {
		for _, u := range []string{q.url, q.dlqURL} {
			if _, err := l.sqs.DeleteQueue(ctx, &awssqs.DeleteQueueInput{QueueUrl: aws.String(u)}); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if _, err := l.sns.DeleteTopic(ctx, &sns.DeleteTopicInput{TopicArn: aws.String(l.topicARN)}); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// translate maps an AWS error to Rookery's kinds: throttling, server faults and a context that
// ended are Unavailable (a retry may succeed); the rest is Internal.
func translate(op rookery.Op, err error) error {
	if err == nil {
		return nil
	}
	var ae smithy.APIError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return rookery.E(op, rookery.Unavailable, "SNS/SQS did not answer in time", err)
	case errors.As(err, &ae) && ae.ErrorFault() == smithy.FaultClient && !throttled(ae.ErrorCode()):
		return rookery.E(op, rookery.Internal, err)
	}
	return rookery.E(op, rookery.Unavailable, "SNS/SQS is unavailable", err)
}

func throttled(code string) bool {
	switch code {
	case "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottled", "KMSThrottlingException":
		return true
	}
	return false
}

// queueName is the name of group's queue (dlq: its dead-letter queue). SQS allows 80 characters.
func (l *Log) queueName(group string, dlq bool) (string, error) {
	name := l.prefix + "-" + group
	if dlq {
		name += "-dlq"
	}
	name += ".fifo"
	if len(name) > 80 {
		return "", rookery.E(rookery.Invalid, fmt.Sprintf("queue name %s is longer than SQS's 80 characters: shorten the prefix or the group", name))
	}
	return name, nil
}

// createGroup creates (idempotently) group's queue and DLQ and subscribes the queue to the topic.
func (l *Log) createGroup(ctx context.Context, group string, types []string) (*queue, error) {
	const op rookery.Op = "sqs.createGroup"
	if err := events.CheckGroup(op, group); err != nil {
		return nil, err
	}
	dlqName, err := l.queueName(group, true)
	if err != nil {
		return nil, err
	}
	name, _ := l.queueName(group, false)
	fifo := map[string]string{
		"FifoQueue":                 "true",
		"ContentBasedDeduplication": "false",
		"MessageRetentionPeriod":    "1209600", // 14 days, SQS's most
		// High-throughput FIFO: de-duplication and throughput per message group (key).
		"DeduplicationScope":  "messageGroup",
		"FifoThroughputLimit": "perMessageGroupId",
	}
	dlq, err := l.sqs.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(dlqName), Attributes: fifo})
	if err != nil {
		return nil, translate(op, err)
	}
	dlqARN, err := l.queueARN(ctx, aws.ToString(dlq.QueueUrl))
	if err != nil {
		return nil, err
	}
	redrive, _ := json.Marshal(map[string]any{"deadLetterTargetArn": dlqARN, "maxReceiveCount": l.o.MaxReceives})
	attrs := map[string]string{"VisibilityTimeout": "30", "RedrivePolicy": string(redrive)}
	for k, v := range fifo {
		attrs[k] = v
	}
	q, err := l.sqs.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		return nil, translate(op, err)
	}
	url := aws.ToString(q.QueueUrl)
	arn, err := l.queueARN(ctx, url)
	if err != nil {
		return nil, err
	}
	// The topic may send to the queue (needed on AWS; emulators ignore it).
	policy, _ := json.Marshal(map[string]any{
		"Version": "2012-10-17",
		"Statement": []any{map[string]any{
			"Effect": "Allow", "Principal": map[string]string{"Service": "sns.amazonaws.com"},
			"Action": "sqs:SendMessage", "Resource": arn,
			"Condition": map[string]any{"ArnEquals": map[string]string{"aws:SourceArn": l.topicARN}},
		}},
	})
	if _, err := l.sqs.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{
		QueueUrl: aws.String(url), Attributes: map[string]string{"Policy": string(policy)},
	}); err != nil {
		return nil, translate(op, err)
	}
	if err := l.subscribe(ctx, arn, types); err != nil {
		return nil, err
	}
	qu := &queue{url: url, arn: arn, dlqURL: aws.ToString(dlq.QueueUrl)}
	l.mu.Lock()
	l.queues[group] = qu
	l.mu.Unlock()
	return qu, nil
}

// subscribe subscribes queue arn to the topic, with a filter policy of types (nil: every type).
// Subscribing again with the same attributes is a no-op; SNS refuses it with others ("already
// exists with different attributes"), as when a version changed a group's types: the queue's
// subscription then gets the new filter in place.
func (l *Log) subscribe(ctx context.Context, arn string, types []string) error {
	const op rookery.Op = "sqs.subscribe"
	filter := "{}" // SNS's policy that lets every message through
	attrs := map[string]string{"RawMessageDelivery": "true"}
	if len(types) > 0 {
		f, _ := json.Marshal(map[string][]string{"type": types})
		filter = string(f)
		attrs["FilterPolicy"] = filter
		attrs["FilterPolicyScope"] = "MessageAttributes"
	}
	_, err := l.sns.Subscribe(ctx, &sns.SubscribeInput{
		TopicArn: aws.String(l.topicARN), Protocol: aws.String("sqs"), Endpoint: aws.String(arn),
		Attributes: attrs, ReturnSubscriptionArn: true,
	})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "InvalidParameter" || !strings.Contains(ae.ErrorMessage(), "already exists") {
		return translate(op, err)
	}
	sub, err := l.subscriptionOf(ctx, arn)
	if err != nil {
		return err
	}
	l.log.Info("changing the filter of a queue's subscription", "queue", arn, "filter", filter)
	for _, a := range [][2]string{{"FilterPolicyScope", "MessageAttributes"}, {"FilterPolicy", filter}, {"RawMessageDelivery", "true"}} {
		if _, err := l.sns.SetSubscriptionAttributes(ctx, &sns.SetSubscriptionAttributesInput{
			SubscriptionArn: aws.String(sub), AttributeName: aws.String(a[0]), AttributeValue: aws.String(a[1]),
		}); err != nil {
			return translate(op, err)
		}
	}
	return nil
}

// subscriptionOf returns the ARN of queue arn's subscription to the topic.
func (l *Log) subscriptionOf(ctx context.Context, arn string) (string, error) {
	const op rookery.Op = "sqs.subscriptionOf"
	p := sns.NewListSubscriptionsByTopicPaginator(l.sns, &sns.ListSubscriptionsByTopicInput{TopicArn: aws.String(l.topicARN)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return "", translate(op, err)
		}
		for _, s := range page.Subscriptions {
			if aws.ToString(s.Endpoint) == arn && aws.ToString(s.Protocol) == "sqs" {
				return aws.ToString(s.SubscriptionArn), nil
			}
		}
	}
	return "", rookery.E(op, rookery.Internal, "SNS says the queue is subscribed, and does not list its subscription")
}

func (l *Log) queueARN(ctx context.Context, url string) (string, error) {
	out, err := l.sqs.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", translate("sqs.queueARN", err)
	}
	return out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], nil
}

// group returns group's queues, creating them (every type) if this Log has not seen the group.
func (l *Log) group(ctx context.Context, group string) (*queue, error) {
	l.mu.Lock()
	q := l.queues[group]
	l.mu.Unlock()
	if q != nil {
		return q, nil
	}
	return l.createGroup(ctx, group, nil)
}

// existing returns group's queues if they exist, nil if not: what reads a group (its lag, its dead
// letters) creates nothing, so that an operator's typo does not leave a queue filling up.
func (l *Log) existing(ctx context.Context, group string) (*queue, error) {
	l.mu.Lock()
	q := l.queues[group]
	l.mu.Unlock()
	if q != nil {
		return q, nil
	}
	name, err := l.queueName(group, false)
	if err != nil {
		return nil, err
	}
	dlqName, _ := l.queueName(group, true)
	var urls [2]string
	for i, n := range []string{name, dlqName} {
		out, err := l.sqs.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String(n)})
		var missing *sqstypes.QueueDoesNotExist
		if errors.As(err, &missing) {
			return nil, nil
		}
		if err != nil {
			return nil, translate("sqs.existing", err)
		}
		urls[i] = aws.ToString(out.QueueUrl)
	}
	return &queue{url: urls[0], dlqURL: urls[1]}, nil
}

// messageGroup is the FIFO message group of key: the key itself when SQS allows it (1 to 128
// printable ASCII characters), else its SHA-256.
func messageGroup(key string) string {
	ok := len(key) <= 128
	for i := 0; ok && i < len(key); i++ {
		ok = key[i] > ' ' && key[i] < 0x7f
	}
	if ok {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// dedupID is the de-duplication id of an event: its id (at most 128 characters), else its SHA-256.
func dedupID(id string) string { return messageGroup(id) }

// Append implements events.Log: events are published in batches (10, SNS's most), in lanes by
// key so that a key's events are published in order while the lanes publish at once. SNS FIFO
// de-duplicates by id for 5 minutes; the consumers are idempotent beyond that.
func (l *Log) Append(ctx context.Context, evs []rookery.Event) error {
	const op rookery.Op = "sqs.Append"
	const lanes = 8
	var byLane [lanes][]rookery.Event
	for _, ev := range evs {
		if ev.ID == "" || ev.Type == "" || ev.Key == "" {
			return rookery.E(op, rookery.Invalid, "an event needs an id, a type and a key")
		}
		p := events.Partition(ev.Key, lanes)
		byLane[p] = append(byLane[p], ev)
	}
	var wg sync.WaitGroup
	errs := make([]error, lanes)
	for i, lane := range byLane {
		if len(lane) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for len(lane) > 0 {
				n := min(l.o.PublishBatch, len(lane))
				if err := l.publish(ctx, lane[:n]); err != nil {
					errs[i] = err
					return
				}
				lane = lane[n:]
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return rookery.E(op, err)
	}
	return nil
}

// publish publishes a batch of events in one PublishBatch; entries SNS failed are sent again.
func (l *Log) publish(ctx context.Context, evs []rookery.Event) error {
	const op rookery.Op = "sqs.publish"
	entries := make([]snstypes.PublishBatchRequestEntry, 0, len(evs))
	for i, ev := range evs {
		body, err := json.Marshal(ev)
		if err != nil {
			return rookery.E(op, rookery.Invalid, err)
		}
		entries = append(entries, snstypes.PublishBatchRequestEntry{
			Id: aws.String(strconv.Itoa(i)), Message: aws.String(string(body)),
			MessageGroupId: aws.String(messageGroup(ev.Key)), MessageDeduplicationId: aws.String(dedupID(ev.ID)),
			MessageAttributes: map[string]snstypes.MessageAttributeValue{
				"type": {DataType: aws.String("String"), StringValue: aws.String(ev.Type)},
			},
		})
	}
	for attempt := 0; len(entries) > 0; attempt++ {
		out, err := l.sns.PublishBatch(ctx, &sns.PublishBatchInput{TopicArn: aws.String(l.topicARN), PublishBatchRequestEntries: entries})
		if err != nil {
			return translate(op, err)
		}
		if len(out.Failed) == 0 {
			return nil
		}
		if attempt == 4 {
			f := out.Failed[0]
			return rookery.E(op, rookery.Unavailable, fmt.Sprintf("SNS refused %d events: %s %s", len(out.Failed), aws.ToString(f.Code), aws.ToString(f.Message)))
		}
		// Resend only what failed, in the original order (a key's later events may be among them,
		// so those after the first failure go again too; SNS de-duplicates the ones that made it).
		first := len(entries)
		for _, f := range out.Failed {
			i, _ := strconv.Atoi(aws.ToString(f.Id))
			first = min(first, i)
		}
		entries = entries[first:]
		for i := range entries {
			entries[i].Id = aws.String(strconv.Itoa(i))
		}
		select {
		case <-ctx.Done():
			return translate(op, ctx.Err())
		case <-time.After(time.Duration(50<<attempt) * time.Millisecond):
		}
	}
	return nil
}

// Subscribe implements events.Log. The subscriptions of a group in one Log share one member, which
// receives the group's messages and hands them out.
func (l *Log) Subscribe(ctx context.Context, group string, opts events.SubscribeOptions) (events.Subscription, error) {
	const op rookery.Op = "sqs.Subscribe"
	if err := events.CheckGroup(op, group); err != nil {
		return nil, err
	}
	opts = opts.WithDefaults()
	q, err := l.group(ctx, group)
	if err != nil {
		return nil, rookery.E(op, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, rookery.E(op, rookery.Unavailable, "the log is closed")
	}
	m := l.members[group]
	if m == nil || m.isStopped() {
		m = newMember(l, group, q, opts.AckWait)
		l.members[group] = m
		m.start()
	}
	return m.join(), nil
}

// leave forgets m once its last subscription closed.
func (l *Log) leave(m *member) {
	l.mu.Lock()
	if l.members[m.group] == m {
		delete(l.members, m.group)
	}
	l.mu.Unlock()
}

// Lag implements events.Log: the queue's messages (visible, in flight and delayed; SQS's counts
// are approximate on AWS) and, of the messages this process holds, the oldest's time of sending.
// SQS tells no age of its oldest message but through CloudWatch (ApproximateAgeOfOldestMessage),
// so a backlog that no process has received yet shows its count with the age of what is held.
func (l *Log) Lag(ctx context.Context, group string) (int64, time.Time, error) {
	const op rookery.Op = "sqs.Lag"
	if err := events.CheckGroup(op, group); err != nil {
		return 0, time.Time{}, err
	}
	q, err := l.existing(ctx, group)
	if err != nil || q == nil {
		return 0, time.Time{}, err
	}
	out, err := l.sqs.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{
		QueueUrl: aws.String(q.url),
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		return 0, time.Time{}, translate(op, err)
	}
	var n int64
	for _, v := range out.Attributes {
		c, _ := strconv.ParseInt(v, 10, 64)
		n += c
	}
	if n == 0 {
		return 0, time.Time{}, nil
	}
	l.mu.Lock()
	m := l.members[group]
	l.mu.Unlock()
	var oldest time.Time
	if m != nil {
		oldest = m.oldest()
	}
	return n, oldest, nil
}

// Ping implements events.Log: the topic and every group's queue answer.
func (l *Log) Ping(ctx context.Context) error {
	const op rookery.Op = "sqs.Ping"
	if _, err := l.sns.GetTopicAttributes(ctx, &sns.GetTopicAttributesInput{TopicArn: aws.String(l.topicARN)}); err != nil {
		return translate(op, err)
	}
	l.mu.Lock()
	urls := make([]string, 0, len(l.queues))
	for _, q := range l.queues {
		urls = append(urls, q.url, q.dlqURL)
	}
	l.mu.Unlock()
	for _, u := range urls {
		if _, err := l.sqs.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{
			QueueUrl: aws.String(u), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
		}); err != nil {
			return translate(op, err)
		}
	}
	return nil
}

// Close implements events.Log: every member stops and gives back the messages it holds.
func (l *Log) Close() error {
	l.mu.Lock()
	l.closed = true
	ms := make([]*member, 0, len(l.members))
	for _, m := range l.members {
		ms = append(ms, m)
	}
	l.mu.Unlock()
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Go(m.stop) // each waits for its poll to end (at most WaitTime)
	}
	wg.Wait()
	return nil
}

// seconds rounds d up to whole seconds within SQS's visibility range (0 to 12 hours).
func seconds(d time.Duration) int32 {
	s := math.Ceil(d.Seconds())
	return int32(max(0, min(s, 12*3600)))
}
