package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func noEnv(string) string { return "" }

func TestUsage(t *testing.T) {
	tests := []struct {
		args    []string
		ok      bool
		stdout  string
		stderr  string
		errWant string
	}{
		{[]string{"-h"}, true, "healthcheck", "", ""},
		{[]string{"--help"}, true, "migrate", "", ""},
		{[]string{"help"}, true, "SMSGW_ADMIN_TOKEN", "", ""},
		{[]string{"migrate", "-h"}, true, "usage: smsgw", "", ""},
		{[]string{"-nope"}, false, "", "usage: smsgw", "not defined"},
		{[]string{"frobnicate"}, false, "", "usage: smsgw", "unknown command"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(context.Background(), append([]string{"smsgw"}, tt.args...), noEnv, &out, &errb)
			if (err == nil) != tt.ok || (err != nil && !strings.Contains(err.Error(), tt.errWant)) {
				t.Fatalf("error %v", err)
			}
			if !strings.Contains(out.String(), tt.stdout) || !strings.Contains(errb.String(), tt.stderr) {
				t.Fatalf("stdout %q\nstderr %q", out.String(), errb.String())
			}
		})
	}
}
