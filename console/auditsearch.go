package console

import (
	"encoding/csv"
	"html/template"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"smsgw/otp"
)

// auditForm is the search as typed; times are UTC, as datetime-local
// fields send them ("2006-01-02T15:04").
type auditForm struct {
	Phone, IP, RequestID, Outcome, Kind, From, To string
	Limit                                         int
}

type auditData struct {
	Form     auditForm
	Rows     []otp.AuditEvent
	Searched bool
	CSVURL   template.URL
	Outcomes []string
	NoAudit  bool
}

var outcomes = []string{"sending", "sent", "approved", "invalid_code", "no_pending_code", "rate_limited", "phone_not_allowed",
	"invalid_phone", "invalid_request", "provider_error", "unavailable", "unauthorized", "forbidden", "ok"}

const formTime = "2006-01-02T15:04"

func (c *Console) auditQuery(f *auditForm) (otp.AuditQuery, error) {
	q := otp.AuditQuery{RequestID: f.RequestID, Outcome: f.Outcome, Kind: f.Kind, Limit: f.Limit}
	if f.Phone != "" {
		ph, err := c.parsePhone(f.Phone, "")
		if err != nil {
			return q, err
		}
		q.Phone, f.Phone = ph.E164, ph.E164
	}
	if f.IP != "" {
		if p, err := netip.ParsePrefix(f.IP); err == nil {
			q.IP = p.Masked()
		} else if a, err := netip.ParseAddr(f.IP); err == nil {
			q.IP = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		} else {
			return q, otp.Errorf(otp.EInvalidRequest, "IP is an address or a network such as 203.0.113.0/24")
		}
	}
	for _, t := range []struct {
		raw  string
		dst  *time.Time
		name string
	}{{f.From, &q.From, "From"}, {f.To, &q.To, "To"}} {
		if t.raw == "" {
			continue
		}
		v, err := time.Parse(formTime, t.raw)
		if err != nil {
			if v, err = time.Parse(time.RFC3339, t.raw); err != nil {
				return q, otp.Errorf(otp.EInvalidRequest, "%s is a time like 2026-11-22T09:30 (UTC)", t.name)
			}
		}
		*t.dst = v.UTC()
	}
	if f.Kind != "" && f.Kind != otp.KindSend && f.Kind != otp.KindVerify && f.Kind != otp.KindAdmin {
		return q, otp.Errorf(otp.EInvalidRequest, "kind is send, verify or admin")
	}
	return q, nil
}

// auditPage searches the audit trail; format=csv downloads the same rows.
func (c *Console) auditPage(w http.ResponseWriter, r *http.Request, a *action) error {
	v := r.URL.Query()
	f := auditForm{Phone: strings.TrimSpace(v.Get("phone")), IP: strings.TrimSpace(v.Get("ip")),
		RequestID: strings.TrimSpace(v.Get("request_id")), Outcome: v.Get("outcome"), Kind: v.Get("kind"),
		From: v.Get("from"), To: v.Get("to"), Limit: 100}
	if n, err := strconv.Atoi(v.Get("limit")); err == nil && n >= 1 && n <= 10000 {
		f.Limit = n
	}
	d := auditData{Form: f, Outcomes: outcomes, NoAudit: c.d.Audit == nil}
	p := page{Title: "Audit search", Nav: "audit", Data: &d}
	csvOut := v.Get("format") == "csv"
	if csvOut {
		a.name = "audit.export"
	}
	err := func() error {
		if c.d.Audit == nil {
			if v.Has("search") || csvOut {
				return otp.Errorf(otp.EUnavailable, "audit search needs Postgres; in -dev the audit log is printed to stderr")
			}
			return nil
		}
		if !v.Has("search") && !csvOut {
			return nil
		}
		q, err := c.auditQuery(&d.Form)
		if err != nil {
			return err
		}
		a.phone = q.Phone
		rows, err := c.d.Audit.Search(r.Context(), q)
		if err != nil {
			return &otp.Error{Code: otp.EUnavailable, Message: "the audit log is unavailable right now", Err: err}
		}
		d.Rows, d.Searched = rows, true
		cq := r.URL.Query()
		cq.Set("format", "csv")
		d.CSVURL = template.URL("/console/audit?" + cq.Encode()) // built here from parsed values
		return nil
	}()
	if err == nil && csvOut {
		writeCSV(w, d.Rows)
		return nil
	}
	return c.renderResult(w, r, "audit", &a.sess, p, err)
}

func writeCSV(w http.ResponseWriter, rows []otp.AuditEvent) {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="smsgw-audit.csv"`)
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"id", "created_at", "kind", "outcome", "request_id", "phone_e164", "client_ip", "reason",
		"provider", "provider_message_id", "delivery_status", "delivery_error_code", "api_key", "count", "last_at", "subject", "segments"})
	for _, e := range rows {
		ip := ""
		if e.ClientIP.IsValid() {
			ip = e.ClientIP.String()
		}
		last := ""
		if e.Rollup() {
			last = e.LastAt.UTC().Format(time.RFC3339Nano)
		}
		_ = cw.Write([]string{e.ID, e.Time.UTC().Format(time.RFC3339Nano), e.Kind, e.Outcome, cell(e.RequestID), e.Phone, ip,
			cell(e.Reason), cell(e.Provider), cell(e.MessageID), cell(e.DeliveryStatus), cell(e.DeliveryErrorCode), cell(e.APIKey),
			strconv.Itoa(e.Requests()), last, cell(e.Subject), segmentsCell(e.Segments)})
	}
	cw.Flush()
}

// segmentsCell is a send's segment count, empty where no text was made.
func segmentsCell(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// cell keeps a value from being read as a formula by a spreadsheet (CSV
// injection): request ids and provider answers are written by others.
func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
