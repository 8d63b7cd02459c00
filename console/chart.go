package console

import (
	"fmt"
	"html"
	"strings"
)

// series is one line of bars in a chart, drawn in the CSS class Class.
type series struct {
	Name   string
	Class  string
	Values []int
}

// barChart draws grouped bars as inline SVG: no script, no image request,
// readable by screen readers through its title and each bar's title.
func barChart(title string, labels []string, ss []series) string {
	const w, h, top, bottom, left = 640, 180, 10, 22, 36
	peak := 1
	for _, s := range ss {
		for _, v := range s.Values {
			peak = max(peak, v)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="%s" preserveAspectRatio="none">`, w, h, html.EscapeString(title))
	fmt.Fprintf(&b, `<title>%s</title>`, html.EscapeString(title))
	plotH := float64(h - top - bottom)
	// Axis: zero and peak.
	fmt.Fprintf(&b, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"/>`, left, h-bottom, w, h-bottom)
	fmt.Fprintf(&b, `<text class="tick" x="%d" y="%d" text-anchor="end">%d</text>`, left-4, top+8, peak)
	fmt.Fprintf(&b, `<text class="tick" x="%d" y="%d" text-anchor="end">0</text>`, left-4, h-bottom)
	n := len(labels)
	if n == 0 {
		b.WriteString(`</svg>`)
		return b.String()
	}
	slot := float64(w-left) / float64(n)
	bar := slot * 0.8 / float64(max(len(ss), 1))
	every := max(n/8, 1)
	for i, l := range labels {
		x0 := float64(left) + slot*float64(i) + slot*0.1
		for j, s := range ss {
			v := 0
			if i < len(s.Values) {
				v = s.Values[i]
			}
			bh := plotH * float64(v) / float64(peak)
			fmt.Fprintf(&b, `<rect class="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s %s: %d</title></rect>`,
				html.EscapeString(s.Class), x0+bar*float64(j), float64(h-bottom)-bh, bar, bh,
				html.EscapeString(l), html.EscapeString(s.Name), v)
		}
		if i%every == 0 && x0+40 < w {
			fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%d">%s</text>`, x0, h-6, html.EscapeString(l))
		}
	}
	b.WriteString(`</svg>`)
	return b.String()
}
