package testenv

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"testing"
	"time"
)

// Response is an HTTP answer read whole, its JSON body parsed when it is an
// object.
type Response struct {
	Status int
	Header http.Header
	Body   map[string]any
	Raw    []byte
}

// ErrorCode is error.code of the error envelope, or "".
func (r Response) ErrorCode() string {
	c, _ := r.ErrorField("code").(string)
	return c
}

// ErrorField is a member of the error envelope's error object.
func (r Response) ErrorField(name string) any {
	e, _ := r.Body["error"].(map[string]any)
	return e[name]
}

// Do sends req and reads the whole answer.
func Do(t testing.TB, c *http.Client, req *http.Request) Response {
	t.Helper()
	var conn httptrace.GotConnInfo
	start := time.Now()
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { conn = info },
	}))
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%v (after %s; %s)", err, time.Since(start).Round(time.Millisecond), connState(conn))
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := Response{Status: res.StatusCode, Header: res.Header, Raw: raw}
	_ = json.Unmarshal(raw, &r.Body)
	CheckContract(t, req, r.Status, r.Header, r.Raw)
	return r
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// GetOK says whether a GET of url answers 200 within 5 s: what a test polls
// while a server it started comes up.
func GetOK(url string) bool {
	c := http.Client{Timeout: 5 * time.Second}
	res, err := c.Get(url)
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode == http.StatusOK
}

// connState says which connection a request went out on: what a failure
// needs to tell a server that dropped a request from a stale pooled one.
func connState(c httptrace.GotConnInfo) string {
	if c.Conn == nil {
		return "no connection"
	}
	if !c.Reused {
		return fmt.Sprintf("new connection from %s", c.Conn.LocalAddr())
	}
	return fmt.Sprintf("reused connection from %s, idle %s before", c.Conn.LocalAddr(), c.IdleTime.Round(time.Millisecond))
}
