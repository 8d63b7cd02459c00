package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"strings"
	"sync"
	"time"
)

const cookieName = "smsgw_console"

// sessions are signed cookies: the id and expiry, with an HMAC under a key
// derived from the admin token. Every replica given the same token accepts
// them, and changing the token signs everyone out. Signing out revokes the
// id on this replica (and clears the cookie); another replica still accepts
// a stolen copy until it expires, which is why sessions are short.
type sessions struct {
	key []byte
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	revoked map[string]time.Time
}

type session struct {
	id      string
	expires time.Time
	csrf    string
}

func newSessions(adminToken string, ttl time.Duration, now func() time.Time) *sessions {
	k := sha256.Sum256([]byte("smsgw console session key\x00" + adminToken))
	return &sessions{key: k[:], ttl: ttl, now: now, revoked: map[string]time.Time{}}
}

func (s *sessions) mac(purpose string, data []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(purpose))
	m.Write([]byte{0})
	m.Write(data)
	return m.Sum(nil)
}

var b64 = base64.RawURLEncoding

// start makes a new session and its cookie.
func (s *sessions) start(secure bool) (session, *http.Cookie) {
	raw := make([]byte, 24)
	_, _ = rand.Read(raw[:16])
	exp := s.now().Add(s.ttl).Truncate(time.Second)
	binary.BigEndian.PutUint64(raw[16:], uint64(exp.Unix()))
	value := b64.EncodeToString(raw) + "." + b64.EncodeToString(s.mac("session", raw))
	sess := session{id: b64.EncodeToString(raw[:16]), expires: exp}
	sess.csrf = s.csrfToken(sess.id)
	return sess, s.cookie(value, exp, secure)
}

func (s *sessions) cookie(value string, exp time.Time, secure bool) *http.Cookie {
	c := &http.Cookie{Name: cookieName, Value: value, Path: "/console", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: secure}
	if value == "" {
		c.MaxAge = -1
	} else {
		c.Expires = exp
		c.MaxAge = int(exp.Sub(s.now()).Seconds())
	}
	return c
}

// clear is the cookie that deletes the session cookie.
func (s *sessions) clear(secure bool) *http.Cookie { return s.cookie("", time.Time{}, secure) }

// from returns the request's valid session, if any.
func (s *sessions) from(r *http.Request) (session, bool) {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return session{}, false
	}
	data, sig, ok := strings.Cut(c.Value, ".")
	if !ok {
		return session{}, false
	}
	raw, err1 := b64.DecodeString(data)
	mac, err2 := b64.DecodeString(sig)
	if err1 != nil || err2 != nil || len(raw) != 24 || !hmac.Equal(mac, s.mac("session", raw)) {
		return session{}, false
	}
	exp := time.Unix(int64(binary.BigEndian.Uint64(raw[16:])), 0)
	now := s.now()
	if !now.Before(exp) {
		return session{}, false
	}
	id := b64.EncodeToString(raw[:16])
	s.mu.Lock()
	_, gone := s.revoked[id]
	s.mu.Unlock()
	if gone {
		return session{}, false
	}
	return session{id: id, expires: exp, csrf: s.csrfToken(id)}, true
}

// revoke signs a session out on this replica.
func (s *sessions) revoke(sess session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for id, exp := range s.revoked {
		if !now.Before(exp) {
			delete(s.revoked, id)
		}
	}
	s.revoked[sess.id] = sess.expires
}

// csrfToken is the token every form of a session carries: forms of another
// site cannot know it (synchronizer token, bound to the session).
func (s *sessions) csrfToken(id string) string {
	return b64.EncodeToString(s.mac("csrf", []byte(id)))
}

func (sess session) validCSRF(token string) bool {
	return token != "" && subtle.ConstantTimeCompare([]byte(token), []byte(sess.csrf)) == 1
}

// tokenMatches compares a typed admin token with the configured one in
// constant time, as digests so their lengths do not leak either.
func tokenMatches(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}
