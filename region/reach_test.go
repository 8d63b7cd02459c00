package region

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestUnreachable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"no error", nil, false},
		{"timeout", fmt.Errorf("ratelimit: allow: %w", context.DeadlineExceeded), true},
		{"connection refused", fmt.Errorf("ratelimit: allow: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), true},
		{"connection closed by a cut", fmt.Errorf("ratelimit: allow: %w", io.EOF), true},
		{"client closed", redis.ErrClosed, true},
		{"cluster down", errors.New("CLUSTERDOWN The cluster is down"), true},
		{"failover under way", errors.New("READONLY You can't write against a read only replica."), true},
		{"the client went away", fmt.Errorf("ratelimit: allow: %w", context.Canceled), false},
		{"a script error", errors.New("ERR user_script:1: Script attempted to access nonexistent global variable"), false},
		{"a bad reply", errors.New("ratelimit: allow: unexpected reply [1 2]"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Unreachable(tc.err); got != tc.want {
				t.Fatalf("Unreachable(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
