package rookery

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// VerifyWebhook checks a webhook delivery as the Standard Webhooks specification says: the
// webhook-timestamp is within tolerance of now (0: 5 minutes, against replays) and one of the
// signatures in webhook-signature is secret's (the endpoint's whsec_ secret; during a rotation the
// old and the new one both sign) of "<webhook-id>.<webhook-timestamp>.<body>". body must be the
// request's bytes as received.
func VerifyWebhook(secret string, h http.Header, body []byte, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = 5 * time.Minute
	}
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("rookery: not a webhook delivery (webhook-id, webhook-timestamp or webhook-signature missing)")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("rookery: webhook-timestamp is not Unix seconds")
	}
	if d := time.Since(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return errors.New("rookery: webhook-timestamp is too far from now")
	}
	key := []byte(secret)
	if s, ok := strings.CutPrefix(secret, "whsec_"); ok {
		if k, err := base64.StdEncoding.DecodeString(s); err == nil {
			key = k
		}
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	want := base64.StdEncoding.EncodeToString(m.Sum(nil))
	for _, s := range strings.Fields(sigs) {
		if v, ok := strings.CutPrefix(s, "v1,"); ok && hmac.Equal([]byte(v), []byte(want)) {
			return nil
		}
	}
	return errors.New("rookery: no signature of the webhook matches the secret")
}
