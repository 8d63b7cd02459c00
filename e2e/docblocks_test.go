package e2e

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// markedBlocks returns the fenced code blocks of the file at path (relative
// to the repository root) that follow a line containing marker, as printed.
func markedBlocks(t *testing.T, path, marker string) []string {
	t.Helper()
	b, err := os.ReadFile("../" + path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.Contains(lines[i], marker) {
			continue
		}
		j := i + 1
		for j < len(lines) && !strings.HasPrefix(lines[j], "```") {
			j++
		}
		var block []string
		for j++; j < len(lines) && !strings.HasPrefix(lines[j], "```"); j++ {
			block = append(block, lines[j])
		}
		out = append(out, strings.Join(block, "\n")+"\n")
		i = j
	}
	if len(out) == 0 {
		t.Fatalf("%s has no block marked %q", path, marker)
	}
	return out
}

// expectedLines turns a shell block's "#   " comments (what the reader
// should see; exactly three spaces, else a comment) into patterns: "…" stands for anything, digits for any
// digits, the rest must match as written.
func expectedLines(block string) []*regexp.Regexp {
	digits := regexp.MustCompile(`[0-9]+`)
	var out []*regexp.Regexp
	for _, line := range strings.Split(block, "\n") {
		want, ok := strings.CutPrefix(line, "#   ")
		if !ok || want == "" || want[0] == ' ' {
			continue // a comment, not output
		}
		parts := strings.Split(want, "…")
		for i, p := range parts {
			parts[i] = digits.ReplaceAllString(regexp.QuoteMeta(p), `[0-9]+`)
		}
		out = append(out, regexp.MustCompile("^"+strings.Join(parts, ".*?")+"$"))
	}
	return out
}

// requireSeen fails unless every expected line matches a line of out, in
// order.
func requireSeen(t *testing.T, out string, want []*regexp.Regexp) {
	t.Helper()
	lines := strings.Split(strings.ReplaceAll(out, "\r", ""), "\n")
	at := 0
	for _, re := range want {
		found := false
		for ; at < len(lines); at++ {
			if re.MatchString(lines[at]) {
				found = true
				at++
				break
			}
		}
		if !found {
			t.Fatalf("the output has no line like %s (in order):\n%s", re, out)
		}
	}
}
