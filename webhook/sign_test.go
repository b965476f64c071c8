package webhook_test

import (
	"testing"
	"time"

	"github.com/rookery/rookery/webhook"
)

// The reference vector of the Standard Webhooks specification.
func TestSignMatchesTheSpecification(t *testing.T) {
	const (
		secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		id     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		ts     = 1614265330
		body   = `{"test": 2432232314}`
		want   = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	)
	if got := webhook.Sign([]string{secret}, id, ts, []byte(body)); got != want {
		t.Fatalf("Sign = %s; want %s", got, want)
	}
	at := time.Unix(ts, 0)
	if err := webhook.Verify(secret, id, "1614265330", want, []byte(body), at); err != nil {
		t.Fatal(err)
	}
	// Two secrets (a rotation): two signatures, each verifies with its secret.
	other := "whsec_" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
	both := webhook.Sign([]string{other, secret}, id, ts, []byte(body))
	for _, s := range []string{secret, other} {
		if err := webhook.Verify(s, id, "1614265330", both, []byte(body), at); err != nil {
			t.Errorf("%s with %s: %v", both, s, err)
		}
	}
	for name, err := range map[string]error{
		"tampered body": webhook.Verify(secret, id, "1614265330", want, []byte(body+" "), at),
		"another id":    webhook.Verify(secret, "msg_x", "1614265330", want, []byte(body), at),
		"too old":       webhook.Verify(secret, id, "1614265330", want, []byte(body), at.Add(6*time.Minute)),
		"bad timestamp": webhook.Verify(secret, id, "soon", want, []byte(body), at),
		"no v1":         webhook.Verify(secret, id, "1614265330", want[3:], []byte(body), at),
	} {
		if err == nil {
			t.Errorf("%s: verified", name)
		}
	}
}
