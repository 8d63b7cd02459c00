// Package twiliotest signs requests the way Twilio does, written from
// Twilio's documentation and independent of twilio-go, so tests can check the
// service's signature validation against something other than itself.
package twiliotest

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"net/url"
	"sort"
	"strings"
)

// Sign is X-Twilio-Signature for a POST to u with params:
// base64(HMAC-SHA1(token, u + name1 + value1 + name2 + value2 ...)), names in
// sorted order.
func Sign(token, u string, params map[string]string) string {
	names := make([]string, 0, len(params))
	for k := range params {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(u)
	for _, k := range names {
		b.WriteString(k)
		b.WriteString(params[k])
	}
	m := hmac.New(sha1.New, []byte(token))
	m.Write([]byte(b.String()))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// SignForm is Sign for a form's first values.
func SignForm(token, u string, form url.Values) string {
	params := make(map[string]string, len(form))
	for k := range form {
		params[k] = form.Get(k)
	}
	return Sign(token, u, params)
}
