package region

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// Unreachable says an error means a region's Redis could not be asked (a
// cut link, a dead or failing-over server, a timeout), as opposed to an
// answer: only then may a region fall back on its own ledger.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	var netErr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, redis.ErrClosed), errors.Is(err, redis.ErrPoolTimeout):
		return true
	}
	// A server that answers only to say it cannot serve.
	msg := err.Error()
	for _, p := range []string{"CLUSTERDOWN", "LOADING", "MASTERDOWN", "TRYAGAIN", "READONLY"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
