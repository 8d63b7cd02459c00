package console_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"smsgw/internal/testenv"
)

// flood sends n requests for one phone from one address: the first is
// texted, the rest refused by phone:1m; past the subject's 20 rows a minute
// they are counted on one rollup. It waits until every answer is counted.
//
// The rows a subject may have are per clock minute: a flood that straddles
// one gets a second minute's rows (33 instead of 22, seen in CI), so it
// starts a fresh minute when fewer than 20 seconds of this one are left.
func flood(t *testing.T, r *rig, phone string, n int) {
	t.Helper()
	if now := time.Now(); now.Second() >= 40 {
		time.Sleep(time.Until(now.Truncate(time.Minute).Add(time.Minute)))
	}
	for i := 0; i < n; i++ {
		sendFrom(t, r, phone, "198.51.100.77")
	}
	testenv.WaitUntil(t, 30*time.Second, "every answer to be counted", func() error {
		var sum int
		if err := r.pool.QueryRow(context.Background(), "SELECT coalesce(sum(count), 0) FROM audit_log WHERE kind = 'send'").Scan(&sum); err != nil {
			t.Fatal(err)
		}
		if sum != n {
			return fmt.Errorf("%d of %d answers counted", sum, n)
		}
		return nil
	})
}

// rollupLine is how a rollup reads in the console's audit trail.
var rollupLine = regexp.MustCompile(`rate_limited\s+phone:1m ×24, \d\d:\d\d:\d\d–\d\d:\d\d:\d\d`)

// TestConsoleShowsARollupInABrowser: 45 sends of one number in a minute are
// one sent row, 20 refused rows and one rollup of the other 24, which the
// phone page shows in Chromium as one line.
func TestConsoleShowsARollupInABrowser(t *testing.T) {
	r := newRig(t, false)
	flood(t, r, "+14155552671", 45)
	ctx := newBrowser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(r.URL+"/console"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS("form button[type=submit]"))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.RunResponse(ctx, chromedp.Navigate(r.URL+"/console/phone?phone="+url.QueryEscape("+14155552671"))); err != nil {
		t.Fatal(err)
	}
	trail, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("table.trail")))
	if err != nil {
		t.Fatal(err)
	}
	if !rollupLine.MatchString(trail) {
		t.Fatalf("the phone's trail shows no rollup line like %q:\n%s", rollupLine, trail)
	}
	if n := strings.Count(trail, "rate_limited"); n != 21 {
		t.Fatalf("%d rate_limited lines, want 20 rows and one rollup:\n%s", n, trail)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	artifact(t, "console-rollup.png", png)
}

// TestRollupInCSVAndAdminAPI: Download CSV and the admin audit API carry a
// rollup's count and last_at (and its subject); a plain row counts 1.
func TestRollupInCSVAndAdminAPI(t *testing.T) {
	r := newRig(t, false)
	flood(t, r, "+14155552671", 45)
	b := r.browser(t)
	b.signIn(token)
	res := b.get("/console/audit?search=1&kind=send&format=csv")
	recs, err := csv.NewReader(strings.NewReader(res.body)).ReadAll()
	if err != nil || len(recs) != 23 {
		t.Fatalf("CSV (%v): %d records, want a header and 22 rows:\n%s", err, len(recs), res.body)
	}
	col := map[string]int{}
	for i, name := range recs[0] {
		col[name] = i
	}
	sum, rollups := 0, 0
	for _, rec := range recs[1:] {
		switch rec[col["count"]] {
		case "1":
			sum++
			if rec[col["last_at"]] != "" {
				t.Errorf("a plain row has a last_at: %v", rec)
			}
		case "24":
			sum += 24
			rollups++
			if rec[col["last_at"]] == "" || rec[col["subject"]] != "phone:+14155552671" {
				t.Errorf("rollup without last_at or subject: %v", rec)
			}
		default:
			t.Errorf("row counts %q: %v", rec[col["count"]], rec)
		}
	}
	if sum != 45 || rollups != 1 {
		t.Fatalf("CSV counts %d requests on %d rollups, want 45 on 1", sum, rollups)
	}

	req, _ := http.NewRequest(http.MethodGet, r.URL+"/v1/admin/audit?phone=%2B14155552671&limit=100", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	api := testenv.Do(t, http.DefaultClient, req)
	var events []struct {
		Count  int        `json:"count"`
		LastAt *time.Time `json:"last_at"`
	}
	if err := json.Unmarshal(api.Raw, &events); err != nil || api.Status != 200 {
		t.Fatalf("admin audit: %d %s", api.Status, api.Raw)
	}
	sum = 0
	for _, e := range events {
		sum += e.Count
		if (e.Count > 1) != (e.LastAt != nil) {
			t.Errorf("count %d with last_at %v", e.Count, e.LastAt)
		}
	}
	if sum != 45 {
		t.Fatalf("the admin API counts %d requests, want 45: %s", sum, api.Raw)
	}
}
