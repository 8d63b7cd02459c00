package app

import (
	"context"
	"fmt"
	"log/slog"
)

// RedisLog sends go-redis's own messages (dial failures and the like, one
// per failing request while Redis is down) to the service log at debug level;
// the requests themselves report the outage. go-redis has one logger per
// process, so main sets it.
type RedisLog struct{ Log *slog.Logger }

func (l RedisLog) Printf(ctx context.Context, format string, v ...any) {
	l.Log.DebugContext(ctx, "redis: "+fmt.Sprintf(format, v...))
}
