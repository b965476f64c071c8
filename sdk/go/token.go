package rookery

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"
)

// MintUserToken returns an HS256 token for user, valid for ttl, signed with the server's secret
// (--auth-secret): for an app's backend to hand to its signed-in user. Keep the secret on servers.
func MintUserToken(secret []byte, user string, ttl time.Duration) (string, error) {
	return mint(secret, user, "", ttl)
}

// MintServerToken returns an HS256 server token (scope "server") named sub, valid for ttl: it may
// act for any user (ActingAs). Never give one to a client.
func MintServerToken(secret []byte, sub string, ttl time.Duration) (string, error) {
	return mint(secret, sub, "server", ttl)
}

func mint(secret []byte, sub, scope string, ttl time.Duration) (string, error) {
	if len(secret) < 32 {
		return "", errors.New("rookery: the secret must be at least 32 bytes")
	}
	now := time.Now()
	claims := map[string]any{"sub": sub, "iat": now.Unix(), "exp": now.Add(ttl).Unix()}
	if scope != "" {
		claims["scope"] = scope
	}
	enc := base64.RawURLEncoding
	head, _ := json.Marshal(map[string]string{"alg": "HS256", "typ": "JWT"})
	body, _ := json.Marshal(claims)
	signing := enc.EncodeToString(head) + "." + enc.EncodeToString(body)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(signing))
	return signing + "." + enc.EncodeToString(m.Sum(nil)), nil
}
