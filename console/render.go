package console

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"smsgw/otp"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

func assetHandler() http.Handler {
	sub, _ := fs.Sub(assetFS, "assets")
	return http.FileServerFS(sub)
}

// page is what every template gets.
type page struct {
	Title  string
	Nav    string // the current section, for aria-current
	Error  string
	Notice string
	CSRF   string
	Signed bool
	// Warnings are the configuration's, on every page.
	Warnings []string
	Data     any
}

var funcs = template.FuncMap{
	"dur":     humanDuration,
	"ts":      func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"tshort":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") },
	"hms":     func(t time.Time) string { return t.UTC().Format("15:04:05") },
	"grouped": grouped,
	"pct": func(a, b int) string {
		if b == 0 {
			return "–"
		}
		return fmt.Sprintf("%.0f%%", 100*float64(a)/float64(b))
	},
	"money": func(v float64) string { return fmt.Sprintf("%.2f", v) },
	"num":   func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) },
	"svg":   func(s string) template.HTML { return template.HTML(s) }, // built by chart.go, escaped there
	"kinds": func() []string { return []string{"send", "verify", "admin"} },
	"alt": func(s, alt string) string {
		if s == "" {
			return alt
		}
		return s
	},
}

var pages = func() map[string]*template.Template {
	out := map[string]*template.Template{}
	names, _ := fs.Glob(templateFS, "templates/*.html")
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		out[name] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n))
	}
	return out
}()

// renderResult renders a page whose data may have failed to load: it still
// shows, with err's message and status, and err goes on to be logged.
func (c *Console) renderResult(w http.ResponseWriter, r *http.Request, name string, sess *session, p page, err error) error {
	status := http.StatusOK
	if err != nil {
		p.Error, status = errorMessage(err), c.opt.StatusOf(otp.ErrorCode(err))
	}
	c.render(w, r, status, name, sess, p)
	return err
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, sess *session, p page) {
	if sess != nil {
		p.Signed, p.CSRF = true, sess.csrf
	}
	p.Warnings = c.opt.Warnings
	var buf bytes.Buffer
	if err := pages[name].Execute(&buf, p); err != nil {
		c.log.ErrorContext(r.Context(), "page not rendered", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// humanDuration shows a wait or an age the way operators read it: "42 s",
// "9 min 5 s", "3 h 2 min".
func humanDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64((d + time.Second - 1) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%d s", s)
	case s < 3600:
		if s%60 == 0 {
			return fmt.Sprintf("%d min", s/60)
		}
		return fmt.Sprintf("%d min %d s", s/60, s%60)
	case s < 86400:
		if s%3600/60 == 0 {
			return fmt.Sprintf("%d h", s/3600)
		}
		return fmt.Sprintf("%d h %d min", s/3600, s%3600/60)
	default:
		if s%86400/3600 == 0 {
			return fmt.Sprintf("%d d", s/86400)
		}
		return fmt.Sprintf("%d d %d h", s/86400, s%86400/3600)
	}
}

func asOTPError(err error, e **otp.Error) bool { return errors.As(err, e) }

// grouped writes n with thousands separators, as a rollup's count reads:
// "×1,843".
func grouped(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + grouped(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
