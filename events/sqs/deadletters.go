package sqs

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
)

// A group's dead-letter queue holds two kinds of message: letters the runner wrote (DeadLetter: the
// event, the error, the attempts) and events SQS moved there itself through the redrive policy
// (received MaxReceives times without an ack: their consumers died on them). SQS cannot list a
// queue, so the dead-letter operations read the whole queue: they receive every message, keeping
// it invisible meanwhile, rewrite moved events as letters, and give back what they did not take.
// Dead-letter queues are small and these are operators' tools; two operators reading one queue at
// the same moment see each other's held messages as missing.

// letter is the body of a dead letter in the queue; Seq orders the queue (SentTimestamp is in
// milliseconds).
type letter struct {
	events.DeadLetter
	Seq int64 `json:"seq"`
}

// heldLetter is a letter received by a scan, with its receipt.
type heldLetter struct {
	letter
	receipt string
}

// DeadLetter implements events.Log.
func (l *Log) DeadLetter(ctx context.Context, group string, d events.DeadLetter) error {
	const op rookery.Op = "sqs.DeadLetter"
	q, err := l.group(ctx, group)
	if err != nil {
		return rookery.E(op, err)
	}
	return l.sendLetter(ctx, op, q, letter{DeadLetter: d, Seq: time.Now().UnixNano()})
}

func (l *Log) sendLetter(ctx context.Context, op rookery.Op, q *queue, lt letter) error {
	body, err := json.Marshal(lt)
	if err != nil {
		return rookery.E(op, rookery.Invalid, err)
	}
	// A message group per letter, so that no letter waits behind another while a scan holds it.
	_, err = l.sqs.SendMessage(ctx, &awssqs.SendMessageInput{
		QueueUrl: aws.String(q.dlqURL), MessageBody: aws.String(string(body)),
		MessageGroupId:         aws.String(dedupID("letter:" + lt.Event.ID)),
		MessageDeduplicationId: aws.String(dedupID(lt.Event.ID + "@" + strconv.FormatInt(lt.Seq, 10))),
	})
	return translate(op, err)
}

// scan receives every message of group's dead-letter queue and returns its letters, oldest first,
// one per event (the newest). The caller gives back what it does not delete (release).
func (l *Log) scan(ctx context.Context, op rookery.Op, group string) (*queue, []heldLetter, error) {
	if err := events.CheckGroup(op, group); err != nil {
		return nil, nil, err
	}
	q, err := l.existing(ctx, group)
	if err != nil || q == nil {
		return nil, nil, err // no such group: no dead letters
	}
	l.scanMu.Lock()
	defer l.scanMu.Unlock()
	var all []heldLetter
	const limit = 10000
	for len(all) < limit {
		out, err := l.sqs.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{
			QueueUrl: aws.String(q.dlqURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 60,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{
				sqstypes.MessageSystemAttributeNameApproximateReceiveCount,
				sqstypes.MessageSystemAttributeNameSentTimestamp,
			},
		})
		if err != nil {
			l.release(q, all)
			return nil, nil, translate(op, err)
		}
		if len(out.Messages) == 0 {
			break
		}
		for _, msg := range out.Messages {
			h, ok, err := l.readLetter(ctx, op, q, msg)
			if err != nil {
				l.release(q, all)
				return nil, nil, err
			}
			if ok {
				all = append(all, h)
			}
		}
	}
	slices.SortFunc(all, func(a, b heldLetter) int {
		if a.Seq != b.Seq {
			return compare(a.Seq, b.Seq)
		}
		return compare(a.Event.ID, b.Event.ID)
	})
	// One letter per event: the newest (an event dead-lettered again after a crash or a replay).
	newest := map[string]int{}
	for i, h := range all {
		newest[h.Event.ID] = i
	}
	var letters, dup []heldLetter
	for i, h := range all {
		if newest[h.Event.ID] == i {
			letters = append(letters, h)
		} else {
			dup = append(dup, h)
		}
	}
	l.deleteLetters(ctx, q, dup)
	return q, letters, nil
}

func compare[T int64 | string](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// readLetter decodes a dead-letter message; an event SQS moved there (redrive) is written back as
// a letter, and the moved message deleted.
func (l *Log) readLetter(ctx context.Context, op rookery.Op, q *queue, msg sqstypes.Message) (heldLetter, bool, error) {
	body := []byte(aws.ToString(msg.Body))
	var probe struct {
		Event *rookery.Event `json:"event"`
	}
	if json.Unmarshal(body, &probe) == nil && probe.Event != nil {
		var h heldLetter
		if err := json.Unmarshal(body, &h.letter); err != nil {
			return heldLetter{}, false, rookery.E(op, rookery.Internal, "a dead letter does not decode", err)
		}
		h.receipt = aws.ToString(msg.ReceiptHandle)
		return h, true, nil
	}
	var ev rookery.Event
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID == "" {
		ev = rookery.Event{ID: aws.ToString(msg.MessageId), Type: "Unreadable", Payload: jsonString(string(body))}
	}
	lt := letter{
		DeadLetter: events.DeadLetter{Event: ev, Attempts: l.o.MaxReceives, FailedAt: rookery.Time{Time: time.Now().UTC()},
			Error: fmt.Sprintf("received %d times without an ack (the queue's redrive policy): its consumers stopped while handling it", l.o.MaxReceives)},
		Seq: time.Now().UnixNano(),
	}
	if ms, err := strconv.ParseInt(msg.Attributes[string(sqstypes.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
		lt.Seq = time.UnixMilli(ms).UnixNano()
	}
	if err := l.sendLetter(ctx, op, q, lt); err != nil {
		return heldLetter{}, false, err
	}
	if _, err := l.sqs.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: aws.String(q.dlqURL), ReceiptHandle: msg.ReceiptHandle}); err != nil {
		return heldLetter{}, false, translate(op, err)
	}
	// The rewritten letter is received by a later receive of the same scan.
	return heldLetter{}, false, nil
}

// inBatches calls do with the receipts of hs (those that have one) in batches of up to 10, SQS's
// most, and stops at the first error.
func inBatches(hs []heldLetter, do func(ids, receipts []string) error) error {
	for chunk := range slices.Chunk(hs, 10) {
		var ids, receipts []string
		for i, h := range chunk {
			if h.receipt != "" {
				ids, receipts = append(ids, strconv.Itoa(i)), append(receipts, h.receipt)
			}
		}
		if len(ids) > 0 {
			if err := do(ids, receipts); err != nil {
				return err
			}
		}
	}
	return nil
}

// release gives back the letters a scan held.
func (l *Log) release(q *queue, hs []heldLetter) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	inBatches(hs, func(ids, receipts []string) error {
		entries := make([]sqstypes.ChangeMessageVisibilityBatchRequestEntry, len(ids))
		for i := range ids {
			entries[i] = sqstypes.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(ids[i]), ReceiptHandle: aws.String(receipts[i])}
		}
		l.sqs.ChangeMessageVisibilityBatch(ctx, &awssqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(q.dlqURL), Entries: entries})
		return nil // what is not given back comes back after its visibility timeout
	})
}

func (l *Log) deleteLetters(ctx context.Context, q *queue, hs []heldLetter) error {
	return inBatches(hs, func(ids, receipts []string) error {
		entries := make([]sqstypes.DeleteMessageBatchRequestEntry, len(ids))
		for i := range ids {
			entries[i] = sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(ids[i]), ReceiptHandle: aws.String(receipts[i])}
		}
		_, err := l.sqs.DeleteMessageBatch(ctx, &awssqs.DeleteMessageBatchInput{QueueUrl: aws.String(q.dlqURL), Entries: entries})
		return translate("sqs.deleteLetters", err)
	})
}

// DeadLetters implements events.Log.
func (l *Log) DeadLetters(ctx context.Context, group, after string, limit int) ([]events.DeadLetter, error) {
	const op rookery.Op = "sqs.DeadLetters"
	q, hs, err := l.scan(ctx, op, group)
	if err != nil {
		return nil, err
	}
	defer l.release(q, hs)
	i := 0
	if after != "" {
		for i < len(hs) && hs[i].Event.ID != after {
			i++
		}
		i++
	}
	var out []events.DeadLetter
	for ; i < len(hs) && len(out) < limit; i++ {
		out = append(out, hs[i].DeadLetter)
	}
	return out, nil
}

// take scans group's dead letters for id's, gives back the others, and returns id's held letter
// (NotFound if there is none).
func (l *Log) take(ctx context.Context, op rookery.Op, group, id string) (*queue, heldLetter, error) {
	q, hs, err := l.scan(ctx, op, group)
	if err != nil {
		return nil, heldLetter{}, err
	}
	i := slices.IndexFunc(hs, func(h heldLetter) bool { return h.Event.ID == id })
	if i < 0 {
		l.release(q, hs)
		return nil, heldLetter{}, rookery.E(op, rookery.NotFound, "no dead letter with that event id")
	}
	h := hs[i]
	l.release(q, slices.Delete(hs, i, i+1))
	return q, h, nil
}

// DeadLetterByID implements events.Log.
func (l *Log) DeadLetterByID(ctx context.Context, group, id string) (events.DeadLetter, error) {
	q, h, err := l.take(ctx, "sqs.DeadLetterByID", group, id)
	if err != nil {
		return events.DeadLetter{}, err
	}
	l.release(q, []heldLetter{h})
	return h.DeadLetter, nil
}

// Replay implements events.Log: the event goes straight to the group's queue (not through the
// topic, so no other group sees it again), then the letter is deleted.
func (l *Log) Replay(ctx context.Context, group, id string) error {
	const op rookery.Op = "sqs.Replay"
	q, h, err := l.take(ctx, op, group, id)
	if err != nil {
		return err
	}
	body, err := json.Marshal(h.Event)
	if err == nil {
		_, err = l.sqs.SendMessage(ctx, &awssqs.SendMessageInput{
			QueueUrl: aws.String(q.url), MessageBody: aws.String(string(body)),
			MessageGroupId:         aws.String(messageGroup(h.Event.Key)),
			MessageDeduplicationId: aws.String(dedupID(h.Event.ID + "@replay@" + strconv.FormatInt(time.Now().UnixNano(), 10))),
			MessageAttributes: map[string]sqstypes.MessageAttributeValue{
				"type": {DataType: aws.String("String"), StringValue: aws.String(h.Event.Type)},
			},
		})
	}
	if err != nil {
		l.release(q, []heldLetter{h})
		return translate(op, err)
	}
	return l.deleteLetters(ctx, q, []heldLetter{h})
}

// Drop implements events.Log.
func (l *Log) Drop(ctx context.Context, group, id string) error {
	q, h, err := l.take(ctx, "sqs.Drop", group, id)
	if err != nil {
		return err
	}
	return l.deleteLetters(ctx, q, []heldLetter{h})
}
