package ratelimit

import (
	"context"
	"strconv"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"smsgw/otp"
)

// The two limiters in this file are baselines for the benchmarks only. Neither
// is fit to decide real requests; see their comments.

// seedLimiter is the seed article's algorithm ("Sliding Window SMS Sending
// Rate Limiting Algorithm in PHP with Redis", shared/seeds/000_...), ported
// from its PHP checkLimits as faithfully as Go allows, and kept as a baseline
// to measure smsgw's limiter against. For every window of a subject it runs
// one MULTI/EXEC on the key "<subject>_<windowSeconds>": ZREMRANGEBYSCORE
// 0..now-window, ZADD score=now member="<tel>_<now>", EXPIRE window, ZRANGE
// 0 -1 WITHSCORES; it refuses when the set holds more than max entries and
// stops at the first refusing window.
//
// It is wrong, which is why smsgw does not do this:
//   - Members are "<tel>_<unix seconds>", so requests for the same phone in
//     the same second collapse into one entry: a phone that may send 1 text a
//     minute can be sent any number of texts within one second.
//   - It records a request before deciding it, so refused requests use up the
//     window (a client that keeps retrying is locked out for good), and a
//     refusal by one window or subject leaves the request recorded in the
//     windows and subjects checked before it.
//   - Each window is its own transaction: nothing is atomic across the
//     windows of a subject or across subjects, and the time is the web
//     server's clock in whole seconds, not one shared clock.
type seedLimiter struct {
	rdb    redis.Cmdable
	prefix string
}

// Allow checks subjects in the order given, as the PHP checks the IP and
// then the phone: every subject is checked (and recorded) even when an earlier
// one refused. tel is the phone number the request is for.
func (l *seedLimiter) Allow(ctx context.Context, tel string, subjects []otp.Subject) (bool, error) {
	ok := true
	for _, s := range subjects {
		r, err := l.checkLimits(ctx, s.Rules, s.Key, tel)
		if err != nil {
			return false, err
		}
		ok = ok && r
	}
	return ok, nil
}

// checkLimits is the PHP function of the same name.
func (l *seedLimiter) checkLimits(ctx context.Context, rules []otp.Rule, key, tel string) (bool, error) {
	for _, rule := range rules {
		ruleTime := int64(rule.Window / time.Second)
		redisKey := l.prefix + key + "_" + strconv.FormatInt(ruleTime, 10)
		score := time.Now().Unix() // PHP time()
		member := tel + "_" + strconv.FormatInt(score, 10)
		var members *redis.ZSliceCmd
		_, err := l.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			// Remove data outside the window.
			p.ZRemRangeByScore(ctx, redisKey, "0", strconv.FormatInt(score-ruleTime, 10))
			p.ZAdd(ctx, redisKey, redis.Z{Score: float64(score), Member: member})
			p.Expire(ctx, redisKey, rule.Window)
			members = p.ZRangeWithScores(ctx, redisKey, 0, -1)
			return nil
		})
		if err != nil {
			return false, err
		}
		nums := len(members.Val())
		if nums == 0 { // if (empty($members[3])) break;
			break
		}
		if nums > rule.Max {
			return false, nil
		}
	}
	return true, nil
}

// redisRateLimiter checks a request with github.com/go-redis/redis_rate (GCRA)
// the way one would bolt multi-window limits onto it: one limit per window,
// {Rate: max, Period: window, Burst: max}, one Allow call per window of every
// subject, refused when any refuses. Kept as a baseline only: the windows are
// decided separately (a request refused by one window has already used quota
// in the others, so it can starve a client below its limits), and GCRA with a
// burst is not a sliding window (after a burst it spaces requests out rather
// than admitting max again once the window has passed).
type redisRateLimiter struct {
	l      *redis_rate.Limiter
	prefix string // redis_rate itself puts "rate:" before every key
}

func newRedisRateLimiter(rdb *redis.Client, prefix string) *redisRateLimiter {
	return &redisRateLimiter{l: redis_rate.NewLimiter(rdb), prefix: prefix}
}

func (r *redisRateLimiter) Allow(ctx context.Context, subjects []otp.Subject) (bool, error) {
	ok := true
	for _, s := range subjects {
		for _, rule := range s.Rules {
			res, err := r.l.Allow(ctx, r.prefix+s.Key+":"+rule.Label(),
				redis_rate.Limit{Rate: rule.Max, Period: rule.Window, Burst: rule.Max})
			if err != nil {
				return false, err
			}
			if res.Allowed == 0 {
				ok = false
			}
		}
	}
	return ok, nil
}
