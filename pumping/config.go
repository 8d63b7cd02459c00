package pumping

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Modes of the guard.
const (
	// ModeOff turns every automatic pumping rule off.
	ModeOff = "off"
	// ModeShadow decides and counts every rule but refuses nothing: the way
	// to see on real traffic what enforce would do.
	ModeShadow = "shadow"
	// ModeEnforce refuses what a rule refuses.
	ModeEnforce = "enforce"
)

// Rules, by the name configuration, metrics and audit reasons use. A range
// rule counts the distinct numbers texted in one block of 10^k numbers (the
// E.164 number without its last k digits); a network rule counts the texts
// asked for from one client network.
const (
	RuleRange100  = "range_100"
	RuleRange1k   = "range_1k"
	RuleRange10k  = "range_10k"
	RuleRange100k = "range_100k"
	RuleCountry   = "country"
	// RuleOperator counts, budgets and restricts the texts to one mobile
	// operator of a country as RuleCountry does the country's.
	RuleOperator  = "operator"
	RuleNet64     = "net_64"
	RuleNet56     = "net_56"
	RuleNet48     = "net_48"
	RuleNet6x32   = "net6_32" // an IPv6 /32: an ISP's or carrier's allocation
	RuleNet32     = "net_32"  // one IPv4 address
	RuleNet24     = "net_24"
	RuleNet16     = "net_16" // an IPv4 /16
	RuleSpendHour = "spend_1h"
	RuleSpendDay  = "spend_24h"
)

// rangeDigits is how many trailing digits each range rule drops.
var rangeDigits = map[string]int{RuleRange100: 2, RuleRange1k: 3, RuleRange10k: 4, RuleRange100k: 5}

// DefaultFloors are the cold-start budgets: unverified texts a subject may
// have in the window before any of its codes is approved. They are sized so
// that real users, whose numbers are spread over the whole numbering plan,
// practically never share a block with two others who did not verify, while
// a run of sequential numbers fills a block at once (see docs/pumping.md and
// `make bench-pumping`).
func DefaultFloors() map[string]int {
	return map[string]int{
		RuleRange100: 2, RuleRange1k: 3, RuleRange10k: 4, RuleRange100k: 8,
		RuleCountry: 10, RuleOperator: 5,
		RuleNet64: 5, RuleNet56: 8, RuleNet48: 12, RuleNet6x32: 40,
		RuleNet32: 5, RuleNet24: 10, RuleNet16: 30,
	}
}

// Config is the [pumping] section of the configuration.
type Config struct {
	Mode string
	// Window is how far back unverified texts count, in whole hours.
	Window time.Duration
	// Floors are the budgets of unverified texts per rule before any code is
	// approved; a rule left out (or 0) is off.
	Floors map[string]int
	// Ratio is how many unverified texts each approved code earns its
	// subject on top of the floor.
	Ratio float64
	// HourFactor weighs the last hour's approvals against the window's, so a
	// fresh deployment or a rising evening earns room as fast as it
	// verifies.
	HourFactor float64
	// Grace is no longer used: a country counts a text at once and an
	// approval gives it back. The key is still accepted.
	Grace time.Duration
	// RestrictFor is how long a country stays restricted after its texts
	// that carry no sign of a real user last ran over their budget: while
	// restricted, only sends with such a sign (a returning number, a
	// caller network with approvals of its own, a solved challenge) pass.
	RestrictFor time.Duration
	// ReturningFor is how long a number that approved a code counts as a
	// returning user.
	ReturningFor time.Duration
	// ChallengeBudget holds the sends that pass with a solved challenge to
	// a budget per country that their own approvals earn, so a solving
	// farm stops at the country's floor. Off by default: the contract says
	// a solved challenge passes the pumping rules.
	ChallengeBudget bool
	// HoldFor is the longest a replica answers a refusal from memory before
	// asking Redis again.
	HoldFor time.Duration
	// ProbeEvery lets a network over its budget admit one send this often,
	// so a shared address whose users do verify earns its room back.
	ProbeEvery time.Duration
	Spend      Spend
}

// Spend is the money ceiling: off unless a budget is set.
type Spend struct {
	// Prices per destination country (ISO alpha-2 or "001"), in the
	// currency of the budgets; Default for the others.
	Prices  map[string]float64
	Default float64
	Hour    float64 // most spend in any hour; 0: none
	Day     float64 // most spend in the window; 0: none
}

// On says whether a budget is set.
func (s Spend) On() bool { return s.Hour > 0 || s.Day > 0 }

// price is what a text to country costs, in micro-units.
func (s Spend) price(country string) int64 {
	p, ok := s.Prices[country]
	if !ok {
		p = s.Default
	}
	return micros(p)
}

func micros(v float64) int64 { return int64(math.Round(v * 1e6)) }

// DefaultConfig is what config.toml ships.
func DefaultConfig() Config {
	return Config{
		Mode: ModeEnforce, Window: 24 * time.Hour, Floors: DefaultFloors(),
		Ratio: 1, HourFactor: 4, Grace: 5 * time.Minute, HoldFor: 30 * time.Second, ProbeEvery: 10 * time.Minute,
		RestrictFor: time.Hour, ReturningFor: 30 * 24 * time.Hour,
		Spend: Spend{Default: 0.05},
	}
}

// Validate names the first bad key.
func (c Config) Validate() error {
	switch c.Mode {
	case ModeOff, ModeShadow, ModeEnforce:
	default:
		return fmt.Errorf("pumping.mode: want \"off\", \"shadow\" or \"enforce\", got %q", c.Mode)
	}
	if c.Window < time.Hour || c.Window%time.Hour != 0 || c.Window > 7*24*time.Hour {
		return fmt.Errorf("pumping.window: want a whole number of hours from 1h to 168h, got %s", c.Window)
	}
	names := make([]string, 0, len(c.Floors))
	for name := range c.Floors {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, ok := DefaultFloors()[name]; !ok {
			return fmt.Errorf("pumping.floors.%s: not a rule; the rules are %s", name, strings.Join(ruleNames(), ", "))
		}
		if c.Floors[name] < 0 {
			return fmt.Errorf("pumping.floors.%s: must be 0 (off) or more, got %d", name, c.Floors[name])
		}
	}
	for key, v := range map[string]float64{"pumping.ratio": c.Ratio, "pumping.hour_factor": c.HourFactor,
		"pumping.spend.default_price": c.Spend.Default, "pumping.spend.hour": c.Spend.Hour, "pumping.spend.day": c.Spend.Day} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("%s: must be a number, 0 or more, got %v", key, v)
		}
	}
	for country, p := range c.Spend.Prices {
		if !validCountry(country) {
			return fmt.Errorf("pumping.spend.prices.%s: not an upper-case ISO 3166-1 alpha-2 code or \"001\"", country)
		}
		if math.IsNaN(p) || math.IsInf(p, 0) || p < 0 {
			return fmt.Errorf("pumping.spend.prices.%s: must be a number, 0 or more, got %v", country, p)
		}
	}
	if c.Grace < 0 {
		return fmt.Errorf("pumping.grace: must not be negative, got %s", c.Grace)
	}
	if c.ProbeEvery < 0 {
		return fmt.Errorf("pumping.probe_every: must not be negative (0: never), got %s", c.ProbeEvery)
	}
	if c.RestrictFor < 0 || c.RestrictFor > 24*time.Hour {
		return fmt.Errorf("pumping.restrict_for: want 0 to 24h, got %s", c.RestrictFor)
	}
	if c.ReturningFor < 0 || c.ReturningFor > 400*24*time.Hour {
		return fmt.Errorf("pumping.returning_for: want 0 (no returning users) to 400 days, got %s", c.ReturningFor)
	}
	if c.HoldFor < 0 || c.HoldFor > 10*time.Minute {
		return fmt.Errorf("pumping.hold_for: want 0 to 10m, got %s", c.HoldFor)
	}
	return nil
}

func ruleNames() []string {
	var out []string
	for name := range DefaultFloors() {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func validCountry(c string) bool {
	if c == "001" {
		return true
	}
	return len(c) == 2 && c[0] >= 'A' && c[0] <= 'Z' && c[1] >= 'A' && c[1] <= 'Z'
}
