package region

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/redisbatch"
	"smsgw/otp"
	"smsgw/ratelimit"
)

// Scripts runs Redis scripts (redisbatch.Scripts, one interface for every
// package that runs them).
type Scripts = redisbatch.Scripts

// Store is one region's Redis and what smsgw keeps in it, built by the
// composition root as for a single region.
type Store struct {
	Name        string
	Redis       redis.UniversalClient
	Scripts     Scripts
	Limiter     *ratelimit.Limiter
	Codes       CodeStore
	Idempotency otp.IdempotencyStore
}

// CodeStore is an otp.CodeStore the support desk can also cancel codes in,
// and a caller can withdraw its verification's code from.
type CodeStore interface {
	otp.CodeStore
	otp.CodeWithdrawer
	Cancel(ctx context.Context, phone string) (bool, error)
}

// Options build a Deployment.
type Options struct {
	Homes Homes
	// Fallback is admissions per key and window this region may make from
	// its own ledger while a home region is out of reach (0: fail closed).
	Fallback int
	// Local is this region's store; Remote the others'.
	Local  Store
	Remote []Store
	// FallbackCodes and FallbackIdempotency keep, in the local Redis, the
	// codes and scopes of numbers admitted under fallback.
	FallbackCodes       CodeStore
	FallbackIdempotency otp.IdempotencyStore
	// Prefix is the local Redis's key prefix (the carry lists live there).
	Prefix string
	Log    *slog.Logger
}

// Deployment is this region's view of all of them: it routes each piece of
// state to the region that owns it.
type Deployment struct {
	o       Options
	local   *Store
	regions map[string]*Store
	carry   carry
	// fallbacks counts admissions made under fallback; carried, those
	// since recorded in their home region.
	fallbacks, carried atomic.Uint64
}

// Fallbacks counts admissions this process made under fallback.
func (d *Deployment) Fallbacks() uint64 { return d.fallbacks.Load() }

// Carried counts fallback admissions this process recorded in their home.
func (d *Deployment) Carried() uint64 { return d.carried.Load() }

// New returns the deployment. Every region Homes names must be in Local or
// Remote (the configuration checks it).
func New(o Options) *Deployment {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	d := &Deployment{o: o, local: &o.Local, regions: map[string]*Store{o.Local.Name: &o.Local}}
	for i := range o.Remote {
		d.regions[o.Remote[i].Name] = &o.Remote[i]
	}
	d.carry = carry{rdb: o.Local.Redis, prefix: o.Prefix + "region:carry:"}
	return d
}

// home is the store of a country's home region.
func (d *Deployment) home(country string) *Store {
	if s, ok := d.regions[d.o.Homes.Of(country)]; ok {
		return s
	}
	return d.local
}

// previous is the store of a country's previous home while it is being
// moved, or nil.
func (d *Deployment) previous(country string) *Store {
	return d.regions[d.o.Homes.Previous(country)]
}

// previousOfNumber is previous for an E.164 number.
func (d *Deployment) previousOfNumber(e164 string) *Store {
	return d.regions[d.o.Homes.PreviousOfNumber(e164)]
}

// homeOfNumber is the store of an E.164 number's home region.
func (d *Deployment) homeOfNumber(e164 string) *Store {
	if s, ok := d.regions[d.o.Homes.OfNumber(e164)]; ok {
		return s
	}
	return d.local
}

// fallsBack says whether an error from a remote home lets this region
// decide from its own ledger.
func (d *Deployment) fallsBack(home *Store, err error) bool {
	return d.o.Fallback > 0 && home != d.local && Unreachable(err)
}

// Limiter is the deployment's otp.Limiter.
func (d *Deployment) Limiter() otp.Limiter { return limiter{d} }

// Codes is the deployment's code store.
func (d *Deployment) Codes() CodeStore { return codes{d} }

// Idempotency is the deployment's otp.IdempotencyStore.
func (d *Deployment) Idempotency() otp.IdempotencyStore { return idempotency{d} }

// Run carries fallback admissions to their home regions until ctx ends.
func (d *Deployment) Run(ctx context.Context) error { return d.runCarry(ctx) }
