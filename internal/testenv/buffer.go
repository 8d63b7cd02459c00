package testenv

import (
	"bufio"
	"bytes"
	"encoding/json"
	"sync"
)

// Buffer collects output written from several goroutines (a process's
// stderr, a JSON-lines audit log).
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// JSONLines returns the lines that are JSON objects, parsed, in order.
func (b *Buffer) JSONLines() []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader([]byte(b.String())))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var row map[string]any
		if json.Unmarshal(sc.Bytes(), &row) == nil {
			out = append(out, row)
		}
	}
	return out
}

// AuditRows returns the audit rows among the JSON lines as the table would
// hold them: a send's "sending" line and its final line are one row, with
// the final outcome, in the order rows first appeared.
func (b *Buffer) AuditRows() []map[string]any {
	var out []map[string]any
	at := map[any]int{}
	for _, row := range b.JSONLines() {
		if row["audit"] != "audit_log" {
			continue
		}
		if i, ok := at[row["id"]]; ok {
			out[i] = row
			continue
		}
		at[row["id"]] = len(out)
		out = append(out, row)
	}
	return out
}
