package otp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"smsgw/otp"
)

func TestLogLinesCarryTheRequestID(t *testing.T) {
	for _, tt := range []struct {
		name string
		ctx  context.Context
		want any // request_id in the line; nil when absent
	}{
		{"request", otp.WithRequestID(context.Background(), "req-7f3a"), "req-7f3a"},
		{"no request", context.Background(), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(otp.NewLogHandler(slog.NewJSONHandler(&buf, nil))).With("part", "test")
			log.InfoContext(tt.ctx, "hello", "k", 1)
			var line map[string]any
			if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
				t.Fatalf("%v: %s", err, buf.String())
			}
			if line["request_id"] != tt.want || line["part"] != "test" {
				t.Fatalf("line %s, want request_id %v", strings.TrimSpace(buf.String()), tt.want)
			}
		})
	}
}
