// Package auth verifies and mints the JWT bearer tokens of Rookery's API (API.md, Conventions):
// HS256 with the configured secret, or EdDSA and RS256 verified with configured public keys. `exp`
// is required; `alg: none`, other algorithms, wrong keys, and expired or malformed tokens are all
// Unauthenticated, with nothing more said to the client.
package auth

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/rookery/rookery"
)

// Claims are the claims Rookery reads: the standard ones, and scope "server" for the app's own
// backend.
type Claims struct {
	Scope string `json:"scope,omitempty"`
	jwt.RegisteredClaims
}

// ScopeServer is the scope of a token that may act for any user.
const ScopeServer = "server"

// Verifier checks bearer tokens.
type Verifier struct {
	secret []byte
	ed     []ed25519.PublicKey
	rsa    []*rsa.PublicKey
	clock  rookery.Clock
	known  verified
}

// NewVerifier returns a Verifier that accepts HS256 tokens signed with secret (if not empty) and
// EdDSA or RS256 tokens signed by the private half of one of publicKeys. At least one key is needed.
func NewVerifier(secret []byte, publicKeys []crypto.PublicKey, clock rookery.Clock) (*Verifier, error) {
	v := &Verifier{secret: secret, clock: clock}
	for _, k := range publicKeys {
		switch k := k.(type) {
		case ed25519.PublicKey:
			v.ed = append(v.ed, k)
		case *rsa.PublicKey:
			v.rsa = append(v.rsa, k)
		default:
			return nil, fmt.Errorf("auth: unsupported public key type %T (want Ed25519 or RSA)", k)
		}
	}
	if len(secret) == 0 && len(publicKeys) == 0 {
		return nil, errors.New("auth: no secret and no public key configured")
	}
	return v, nil
}

// Verify returns the caller that token authenticates, or an Unauthenticated error whose message
// says why, for the client (expired, signed with another key, malformed, ...): the reasons of RFC
// 6750's error_description, none of which helps forge a token.
func (v *Verifier) Verify(token string) (rookery.Caller, error) {
	now := v.clock.Now()
	if c, ok := v.known.get(token, now); ok {
		return c, nil
	}
	var claims Claims
	methods := []string{}
	if len(v.secret) > 0 {
		methods = append(methods, jwt.SigningMethodHS256.Alg())
	}
	if len(v.ed) > 0 {
		methods = append(methods, jwt.SigningMethodEdDSA.Alg())
	}
	if len(v.rsa) > 0 {
		methods = append(methods, jwt.SigningMethodRS256.Alg())
	}
	_, err := jwt.ParseWithClaims(token, &claims, v.key,
		jwt.WithValidMethods(methods),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(v.clock.Now),
		jwt.WithLeeway(leeway),
	)
	const op rookery.Op = "auth.Verify"
	if err != nil {
		return rookery.Caller{}, rookery.E(op, rookery.Unauthenticated, rejection(err), err)
	}
	if !rookery.ValidUserID(claims.Subject) {
		return rookery.Caller{}, rookery.E(op, rookery.Unauthenticated, "the token's sub is not a user id")
	}
	if claims.Scope != "" && claims.Scope != ScopeServer {
		return rookery.Caller{}, rookery.E(op, rookery.Unauthenticated, "the token's scope is not \""+ScopeServer+"\" or absent")
	}
	c := rookery.Caller{UserID: claims.Subject, Server: claims.Scope == ScopeServer, Expires: claims.ExpiresAt.Time.Add(leeway)}
	v.known.put(token, c, c.Expires, now)
	return c, nil
}

// rejection says why the JWT library refused a token.
func rejection(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return "the token has expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "the token is not valid yet"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "the token has no exp claim"
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "the token is malformed: not a JWT"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return "the token's signature does not verify with this server's keys (signed with another secret, or with an algorithm it does not accept)"
	}
	return "invalid token"
}

// leeway is the clock skew allowed on exp and nbf.
const leeway = 5 * time.Second

// verified remembers tokens that passed Verify, each until its exp (with the leeway), so that a
// client's every request does not pay for the token's signature check and parse again (an RS256
// signature costs far more than an HS256 one). A token's claims
// are signed, so what it said when it passed holds until it expires; only exp changes the answer.
type verified struct {
	mu     sync.Mutex
	tokens map[string]verifiedToken
}

type verifiedToken struct {
	caller rookery.Caller
	until  time.Time
}

// verifiedMax bounds the tokens remembered; past it, the expired ones go, and if none has, all.
const verifiedMax = 10_000

func (k *verified) get(token string, now time.Time) (rookery.Caller, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	t, ok := k.tokens[token]
	if !ok || !now.Before(t.until) {
		return rookery.Caller{}, false
	}
	return t.caller, true
}

func (k *verified) put(token string, c rookery.Caller, until, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.tokens == nil {
		k.tokens = map[string]verifiedToken{}
	}
	if len(k.tokens) >= verifiedMax {
		maps.DeleteFunc(k.tokens, func(_ string, t verifiedToken) bool { return !now.Before(t.until) })
		if len(k.tokens) >= verifiedMax {
			clear(k.tokens)
		}
	}
	k.tokens[token] = verifiedToken{caller: c, until: until}
}

func (v *Verifier) key(t *jwt.Token) (any, error) {
	switch t.Method.Alg() {
	case jwt.SigningMethodHS256.Alg():
		return v.secret, nil
	case jwt.SigningMethodEdDSA.Alg():
		set := jwt.VerificationKeySet{}
		for _, k := range v.ed {
			set.Keys = append(set.Keys, k)
		}
		return set, nil
	case jwt.SigningMethodRS256.Alg():
		set := jwt.VerificationKeySet{}
		for _, k := range v.rsa {
			set.Keys = append(set.Keys, k)
		}
		return set, nil
	}
	return nil, fmt.Errorf("auth: algorithm %s not accepted", t.Method.Alg())
}

// Mint returns an HS256 token for subject, valid for ttl from now, with scope "server" if server.
func Mint(secret []byte, subject string, server bool, ttl time.Duration, now time.Time) (string, error) {
	if len(secret) == 0 {
		return "", errors.New("auth: no secret to sign with")
	}
	if !rookery.ValidUserID(subject) {
		return "", fmt.Errorf("auth: %q is not a valid user id (1..64 of [A-Za-z0-9_-])", subject)
	}
	c := Claims{RegisteredClaims: jwt.RegisteredClaims{
		Subject:   subject,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}}
	if server {
		c.Scope = ScopeServer
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
}

// ParsePublicKeys reads PEM-encoded Ed25519 and RSA public keys (any number of PEM blocks).
func ParsePublicKeys(pemData []byte) ([]crypto.PublicKey, error) {
	var keys []crypto.PublicKey
	for {
		block, rest := pem.Decode(pemData)
		if block == nil {
			break
		}
		one := pem.EncodeToMemory(block)
		if k, err := jwt.ParseEdPublicKeyFromPEM(one); err == nil {
			keys = append(keys, k)
		} else if k, err := jwt.ParseRSAPublicKeyFromPEM(one); err == nil {
			keys = append(keys, k)
		} else {
			return nil, fmt.Errorf("auth: PEM block %q is neither an Ed25519 nor an RSA public key", block.Type)
		}
		pemData = rest
	}
	if len(keys) == 0 {
		return nil, errors.New("auth: no PEM public key found")
	}
	return keys, nil
}
