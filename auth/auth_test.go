package auth_test

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/auth"
)

var now = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func sign(t *testing.T, m jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestVerify(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	edPub, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	_, otherEd, _ := ed25519.GenerateKey(rand.Reader)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	rsaDER, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	edDER, _ := x509.MarshalPKIXPublicKey(edPub)
	pems := append(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: edDER}), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: rsaDER})...)
	keys, err := auth.ParsePublicKeys(pems)
	if err != nil || len(keys) != 2 {
		t.Fatalf("ParsePublicKeys = %v, %v", keys, err)
	}
	v, err := auth.NewVerifier(secret, keys, rookery.ClockFunc(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	exp := now.Add(time.Hour).Unix()
	user := jwt.MapClaims{"sub": "alice", "exp": exp}
	minted, err := auth.Mint(secret, "app", true, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	payload := base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"alice","exp":9999999999}`))

	accepted := []struct {
		name   string
		token  string
		want   string
		server bool
	}{
		{"an HS256 token signed with the secret", sign(t, jwt.SigningMethodHS256, secret, user), "alice", false},
		{"an EdDSA token signed by a configured key", sign(t, jwt.SigningMethodEdDSA, edPriv, user), "alice", false},
		{"an RS256 token signed by a configured key", sign(t, jwt.SigningMethodRS256, rsaKey, user), "alice", false},
		{"a minted server token", minted, "app", true},
		{"a token just past exp within the leeway", sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice", "exp": now.Add(-2 * time.Second).Unix()}), "alice", false},
	}
	for _, c := range accepted {
		t.Run("accepts "+c.name, func(t *testing.T) {
			got, err := v.Verify(c.token)
			if err != nil {
				t.Fatal(err)
			}
			if got.UserID != c.want || got.Server != c.server {
				t.Fatalf("caller = %+v", got)
			}
		})
	}

	// Each rejection says why, as RFC 6750's error_description does: what the client must fix.
	const signature, malformed = "signature does not verify", "malformed"
	rejected := []struct {
		name, token, why string
	}{
		{"alg none", header + "." + payload + ".", signature},
		{"HS384, an algorithm not accepted", sign(t, jwt.SigningMethodHS384, secret, user), signature},
		{"a wrong secret", sign(t, jwt.SigningMethodHS256, []byte("another secret, same length....."), user), signature},
		{"an EdDSA key not configured", sign(t, jwt.SigningMethodEdDSA, otherEd, user), signature},
		{"an expired token", sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice", "exp": now.Add(-time.Minute).Unix()}), "expired"},
		{"a token without exp", sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice"}), "no exp"},
		{"a token not yet valid", sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice", "exp": exp, "nbf": now.Add(time.Hour).Unix()}), "not valid yet"},
		{"a subject that is not a user id", sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "USER#alice", "exp": exp}), "sub is not a user id"},
		{"an empty subject", sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"exp": exp}), "sub is not a user id"},
		{"an unknown scope", sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice", "exp": exp, "scope": "admin"}), "scope"},
		{"a malformed token", "not.a.token", malformed},
		{"an empty token", "", malformed},
		{"a token with a changed payload", func() string {
			s := sign(t, jwt.SigningMethodHS256, secret, user)
			parts := strings.Split(s, ".")
			parts[1] = base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"mallory","exp":9999999999}`))
			return strings.Join(parts, ".")
		}(), signature},
	}
	for _, c := range rejected {
		t.Run("rejects "+c.name, func(t *testing.T) {
			_, err := v.Verify(c.token)
			if !rookery.IsKind(err, rookery.Unauthenticated) {
				t.Fatalf("error = %v; want Unauthenticated", err)
			}
			if msg := rookery.Message(err); !strings.Contains(msg, c.why) {
				t.Fatalf("client message %q; want it to say %q", msg, c.why)
			}
		})
	}
}

// A verifier with only an RSA public key must not accept an HS256 token "signed" with the public
// key's bytes (algorithm confusion).
func TestRejectsAlgorithmConfusion(t *testing.T) {
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	der, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	v, err := auth.NewVerifier(nil, []crypto.PublicKey{&rsaKey.PublicKey}, rookery.SystemClock)
	if err != nil {
		t.Fatal(err)
	}
	forged := sign(t, jwt.SigningMethodHS256, pemBytes, jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()})
	if _, err := v.Verify(forged); !rookery.IsKind(err, rookery.Unauthenticated) {
		t.Fatalf("forged token: %v", err)
	}
}

func TestNewVerifierNeedsAKey(t *testing.T) {
	if _, err := auth.NewVerifier(nil, nil, rookery.SystemClock); err == nil {
		t.Fatal("a verifier without keys was made")
	}
}

// A token that passed is remembered, but only until it expires: the next Verify after exp (and the
// leeway) fails, as for a token never seen.
func TestVerifiedTokensStillExpire(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	at := now
	v, err := auth.NewVerifier(secret, nil, rookery.ClockFunc(func() time.Time { return at }))
	if err != nil {
		t.Fatal(err)
	}
	token := sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice", "exp": now.Add(time.Minute).Unix()})
	for range 2 { // the second is answered from memory
		if c, err := v.Verify(token); err != nil || c.UserID != "alice" {
			t.Fatalf("Verify = %+v, %v", c, err)
		}
	}
	at = now.Add(time.Minute + 4*time.Second) // within the leeway
	if _, err := v.Verify(token); err != nil {
		t.Fatalf("within the leeway: %v", err)
	}
	at = now.Add(time.Minute + 6*time.Second)
	if _, err := v.Verify(token); !rookery.IsKind(err, rookery.Unauthenticated) {
		t.Fatalf("after exp: %v; want Unauthenticated", err)
	}
	// More tokens than it remembers: every one still verifies.
	for i := range 10_050 {
		tok := sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": fmt.Sprintf("u%d", i), "exp": now.Add(time.Hour).Unix()})
		if c, err := v.Verify(tok); err != nil || c.UserID != fmt.Sprintf("u%d", i) {
			t.Fatalf("token %d: %+v, %v", i, c, err)
		}
	}
}
