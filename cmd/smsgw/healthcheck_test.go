package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

func TestHealthcheck(t *testing.T) {
	var ready atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/healthz":
			w.Write([]byte(`{"status":"ok"}`))
		case r.URL.Path == "/readyz" && ready.Load():
			w.Write([]byte(`{"status":"ready"}`))
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":{"code":"unavailable","message":"not ready: postgres not answering"}}`))
		}
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	port := u.Port()
	tests := []struct {
		name, listen string
		ready, up    bool
		wantErr      string
	}{
		{"healthy", "127.0.0.1:" + port, false, false, ""},
		{"listening on every address", "0.0.0.0:" + port, false, false, ""},
		{"not ready", "127.0.0.1:" + port, true, false, "postgres not answering"},
		{"ready", "127.0.0.1:" + port, true, true, ""},
		{"nothing listening", "127.0.0.1:1", false, false, "connect"},
		{"bad address", "8080", false, false, "server.listen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ready.Store(tt.up)
			var out bytes.Buffer
			err := healthcheck(context.Background(), tt.listen, tt.ready, &out)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("error %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error %v, want one with %q", err, tt.wantErr)
			}
		})
	}
}
