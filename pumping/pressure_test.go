package pumping

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"smsgw/otp"
)

// A restricted country's refusals renew its restriction only while they
// keep at least a quarter of the busiest period's pace since the trip: a
// burst keeps it, the trickle of new users after the burst stopped does
// not, so it lapses restrict_for after the burst's last busy period
// instead of after the last new user refused.
func TestRestrictionRenewsOnlyUnderPressure(t *testing.T) {
	eachLayout(t, func(t *testing.T, f *fixture, cluster bool) {
		g := f.guard(t, func(c *Config) {
			only(RuleCountry)(c)
			c.Floors[RuleCountry] = 6
		}, cluster)
		restrict := DefaultConfig().RestrictFor
		n := 0
		send := func() otp.PumpingReservation {
			n++
			return reserve(t, g, phone(t, fmt.Sprintf("+1415%07d", 5550000+n*997)), ip(fmt.Sprintf("198.18.%d.%d", n/200, n%200+1)))
		}
		until := func() time.Time {
			t.Helper()
			v, err := f.rdb.HGet(context.Background(), f.prefix+"pump:{d:US}:c", fieldRestrictedUntil).Result()
			if err != nil {
				t.Fatal(err)
			}
			ms, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return time.UnixMilli(ms).UTC()
		}
		for i := range 7 { // six texted, the seventh restricts the country
			if r := send(); (r.Refused != nil) != (i == 6) {
				t.Fatalf("send %d: %+v", i, r.Refused)
			}
		}
		for range 40 { // the burst goes on: its refusals are the busiest period
			if r := send(); r.Refused == nil {
				t.Fatal("a send served while the country is restricted")
			}
		}
		f.advance(time.Minute)
		if r := send(); r.Refused == nil {
			t.Fatal("a send served while the country is restricted")
		}
		if got, want := until(), f.clock.Now().Add(restrict); !got.Equal(want) {
			t.Fatalf("during the burst the restriction runs until %s, want %s (renewed)", got, want)
		}
		held := until()
		f.advance(25 * time.Minute) // the burst stopped two periods ago
		if r := send(); r.Refused == nil {
			t.Fatal("a send served while the country is restricted and over its budget")
		}
		if got := until(); !got.Equal(held) {
			t.Fatalf("one new user after the burst moved the restriction's end from %s to %s", held, got)
		}
	})
}
