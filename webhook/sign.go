// Package webhook delivers the webhook queues (package app keeps them) to the app's endpoints, as
// the Standard Webhooks specification has it: a POST of the message with the headers webhook-id
// (the message id, the same on every retry), webhook-timestamp (Unix seconds) and
// webhook-signature ("v1,<base64 HMAC-SHA256>" per secret, space-separated), at least once.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// key returns the HMAC key of a secret: the base64 after "whsec_" (a secret without the prefix is
// taken as it is).
func key(secret string) []byte {
	if s, ok := strings.CutPrefix(secret, "whsec_"); ok {
		if k, err := base64.StdEncoding.DecodeString(s); err == nil {
			return k
		}
	}
	return []byte(secret)
}

// Sign returns the webhook-signature header of a message: one "v1,<signature>" per secret, of
// "<id>.<timestamp>.<body>".
func Sign(secrets []string, id string, ts int64, body []byte) string {
	sigs := make([]string, len(secrets))
	for i, s := range secrets {
		sigs[i] = "v1," + signature(key(s), id, ts, body)
	}
	return strings.Join(sigs, " ")
}

func signature(key []byte, id string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(strconv.FormatInt(ts, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Tolerance is how far a webhook-timestamp may be from the receiver's clock (the specification's
// recommendation against replays).
const Tolerance = 5 * time.Minute

// Verify checks a delivery as a receiver does: the timestamp is within Tolerance of now and one
// of the signatures in header is the secret's signature of the message.
func Verify(secret, id, timestamp, header string, body []byte, now time.Time) error {
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return errors.New("webhook-timestamp is not Unix seconds")
	}
	if d := now.Sub(time.Unix(ts, 0)); d > Tolerance || d < -Tolerance {
		return errors.New("webhook-timestamp is too far from now")
	}
	want := signature(key(secret), id, ts, body)
	for _, s := range strings.Fields(header) {
		if v, ok := strings.CutPrefix(s, "v1,"); ok && hmac.Equal([]byte(v), []byte(want)) {
			return nil
		}
	}
	return errors.New("no signature matches")
}
