package client

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"smsgw/events"
)

func newSecret(t *testing.T) string {
	t.Helper()
	key := make([]byte, 32)
	rand.Read(key)
	return "whsec_" + base64.StdEncoding.EncodeToString(key)
}

// signed is the headers of one delivery, signed by smsgw's own signer
// (events.Sign), as smsgw's deliverer sends them.
func signed(t *testing.T, secret, id string, at time.Time, body []byte) http.Header {
	t.Helper()
	key, err := events.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	h.Set("webhook-signature", events.Sign(key, id, at, body))
	return h
}

func TestWebhookVerify(t *testing.T) {
	secret := newSecret(t)
	w, err := NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	body := []byte(`{"type":"verification.approved","timestamp":"2026-11-26T23:00:00Z","data":{}}`)
	h := signed(t, secret, "evt_1", now, body)
	if err := w.Verify(body, h); err != nil {
		t.Fatalf("smsgw's own signature: %v", err)
	}
	for name, tc := range map[string]struct {
		body []byte
		h    func(http.Header)
		want error
	}{
		"altered body": {append([]byte{' '}, body...), nil, ErrSignature},
		"other id":     {body, func(h http.Header) { h.Set("webhook-id", "evt_2") }, ErrSignature},
		"other secret": {body, func(h http.Header) {
			h.Set("webhook-signature", signed(t, newSecret(t), "evt_1", now, body).Get("webhook-signature"))
		}, ErrSignature},
		"v2 only": {body, func(h http.Header) {
			h.Set("webhook-signature", strings.Replace(h.Get("webhook-signature"), "v1,", "v2,", 1))
		}, ErrSignature},
		"no signature": {body, func(h http.Header) { h.Del("webhook-signature") }, ErrHeaders},
		"no id":        {body, func(h http.Header) { h.Del("webhook-id") }, ErrHeaders},
		"no timestamp": {body, func(h http.Header) { h.Del("webhook-timestamp") }, ErrTimestamp},
		"timestamp 6 min old": {body, func(h http.Header) {
			h2 := signed(t, secret, "evt_1", now.Add(-6*time.Minute), body)
			copyHeader(h, h2)
		}, ErrTimestamp},
		"timestamp 6 min ahead": {body, func(h http.Header) { h2 := signed(t, secret, "evt_1", now.Add(6*time.Minute), body); copyHeader(h, h2) }, ErrTimestamp},
	} {
		t.Run(name, func(t *testing.T) {
			h := h.Clone()
			if tc.h != nil {
				tc.h(h)
			}
			if err := w.Verify(tc.body, h); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	// Several signatures (a secret rotating): one match is enough.
	h2 := h.Clone()
	h2.Set("webhook-signature", "v1,bm90IGl0 "+h.Get("webhook-signature"))
	if err := w.Verify(body, h2); err != nil {
		t.Fatal(err)
	}
	if _, err := NewWebhook("whsec_not base64!"); err == nil {
		t.Fatal("a malformed secret was accepted")
	}
}

func copyHeader(dst, src http.Header) {
	for k, v := range src {
		dst[k] = v
	}
}

// TestWebhookAgreesWithStandardWebhooks checks this verifier against an
// independent implementation, the Standard Webhooks Go library: on
// deliveries signed by it, by smsgw (events.Sign), and on corrupted ones,
// both accept exactly the same.
func TestWebhookAgreesWithStandardWebhooks(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(1, 2))
	var secrets []string
	for range 2 {
		key := make([]byte, 32)
		for i := range key {
			key[i] = byte(rng.IntN(256))
		}
		secrets = append(secrets, "whsec_"+base64.StdEncoding.EncodeToString(key))
	}
	ours, theirs := map[string]*Webhook{}, map[string]*standardwebhooks.Webhook{}
	for _, s := range secrets {
		var err error
		if ours[s], err = NewWebhook(s); err != nil {
			t.Fatal(err)
		}
		if theirs[s], err = standardwebhooks.NewWebhook(s); err != nil {
			t.Fatal(err)
		}
	}
	accepted := 0
	for i := range 2000 {
		secret := secrets[rng.IntN(2)]
		id := "evt_" + strconv.Itoa(rng.IntN(1e6))
		body := make([]byte, rng.IntN(300))
		for j := range body {
			body[j] = byte(rng.IntN(256))
		}
		// Well inside or well outside the 5-minute tolerance, so the two
		// clocks (theirs is time.Now) cannot disagree at the edge.
		at := time.Now().Add(time.Duration(rng.IntN(9)-4) * 2 * time.Minute)
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
		if rng.IntN(2) == 0 {
			sig, _ := theirs[secret].Sign(id, at, body)
			h.Set("webhook-signature", sig)
		} else {
			key, _ := events.ParseSecret(secret)
			h.Set("webhook-signature", events.Sign(key, id, at, body))
		}
		switch rng.IntN(7) {
		case 0: // verified with the other secret
			secret = secrets[0]
			if h.Get("webhook-signature") != "" && rng.IntN(2) == 0 {
				secret = secrets[1]
			}
		case 1: // a flipped byte in the body
			if len(body) > 0 {
				body[rng.IntN(len(body))] ^= 1 << rng.IntN(8)
			}
		case 2: // a flipped character in the signature
			s := []byte(h.Get("webhook-signature"))
			s[3+rng.IntN(len(s)-3)] ^= 1
			h.Set("webhook-signature", string(s))
		case 3: // the last base64 digit's unused bits set: the same bytes, another text
			s := []byte(h.Get("webhook-signature"))
			s[len(s)-2] ^= 1
			h.Set("webhook-signature", string(s))
		case 4: // the timestamp written with a leading zero
			h.Set("webhook-timestamp", "0"+h.Get("webhook-timestamp"))
		}
		our, their := ours[secret].Verify(body, h), theirs[secret].Verify(body, h)
		if (our == nil) != (their == nil) {
			t.Fatalf("case %d: ours %v, Standard Webhooks %v (headers %v)", i, our, their, h)
		}
		if our == nil {
			accepted++
		}
	}
	if accepted < 300 || accepted > 1700 {
		t.Fatalf("%d of 2000 accepted: the cases do not exercise both sides", accepted)
	}
}

func TestWebhookHandler(t *testing.T) {
	secret := newSecret(t)
	w, err := NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	var got []Event
	fail := false
	srv := httptest.NewServer(w.Handler(func(_ context.Context, e Event) error {
		if fail {
			return errors.New("database down")
		}
		got = append(got, e)
		return nil
	}))
	defer srv.Close()
	post := func(body string, h http.Header) int {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(body))
		copyHeader(req.Header, h)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	body := `{"type":"verification.delivered","timestamp":"2026-11-26T23:00:00Z","data":{"verification_id":"ver_1","phone":"+14155550100","country":"US","status":"pending","delivery_status":"delivered","api_key":"signup-backend","request_id":"r-1"}}`
	if s := post(body, signed(t, secret, "evt_1", time.Now(), []byte(body))); s != 204 || len(got) != 1 {
		t.Fatalf("%d, %d events", s, len(got))
	}
	v, err := got[0].Verification()
	if err != nil || got[0].ID != "evt_1" || v.VerificationID != "ver_1" || v.DeliveryStatus != "delivered" || v.APIKey != "signup-backend" {
		t.Fatalf("%+v %+v %v", got[0], v, err)
	}
	if _, err := got[0].Pumping(); err == nil {
		t.Fatal("a verification event decoded as a pumping one")
	}
	if s := post(body, signed(t, newSecret(t), "evt_2", time.Now(), []byte(body))); s != 401 || len(got) != 1 {
		t.Fatalf("forged: %d, %d events", s, len(got))
	}
	fail = true
	if s := post(body, signed(t, secret, "evt_3", time.Now(), []byte(body))); s != 500 {
		t.Fatalf("a failing handler: %d", s)
	}
	fail = false
	pumping := `{"type":"pumping.restricted","timestamp":"2026-11-26T23:00:00Z","data":{"rule":"country","subject":"NG","since":"2026-11-26T22:59:00Z","why":"budget"}}`
	if s := post(pumping, signed(t, secret, "evt_4", time.Now(), []byte(pumping))); s != 204 {
		t.Fatalf("%d", s)
	}
	if p, err := got[1].Pumping(); err != nil || p.Rule != "country" || p.Subject != "NG" {
		t.Fatalf("%+v %v", p, err)
	}
	if s := post("[]", signed(t, secret, "evt_5", time.Now(), []byte("[]"))); s != 400 {
		t.Fatalf("signed non-event: %d", s)
	}
	big := strings.Repeat(" ", 2<<20) + body
	if s := post(big, signed(t, secret, "evt_6", time.Now(), []byte(big))); s != 413 {
		t.Fatalf("huge: %d", s)
	}
}
