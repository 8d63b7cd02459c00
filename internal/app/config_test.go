package app

import (
	"cmp"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"smsgw/otp"
)

func noEnv(string) string { return "" }

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "smsgw.toml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The built-in defaults are the SPEC's.
func TestDefaultsAreTheSpec(t *testing.T) {
	cfg, err := LoadConfig("", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"server.listen", cfg.Server.Listen, "127.0.0.1:8080"},
		{"redis.url", cfg.Redis.URL, "redis://127.0.0.1:6379/0"},
		{"postgres.url", cfg.Postgres.URL, "postgres://postgres@127.0.0.1:5432/smsgw?sslmode=disable"},
		{"phone.default_region", cfg.Phone.DefaultRegion, "US"},
		{"otp.length", cfg.OTP.Length, 6},
		{"otp.ttl", cfg.OTP.TTL.Duration, 10 * time.Minute},
		{"otp.max_attempts", cfg.OTP.MaxAttempts, 5},
		// SPEC's sketch shows "fake", but "outside -dev the fake provider
		// runs only when the config names it": the default names none,
		// -dev uses the fake one and serving refuses to start.
		{"sender.provider", cfg.Sender.Provider, ""},
		{"pumping.mode", cfg.pumping().Mode, "enforce"},
		{"sender.twilio.api_base", cfg.Sender.Twilio.APIBase, "https://api.twilio.com"},
		{"limits.ipv6_prefix", cfg.Limits.IPv6Prefix, 64},
		{"redis.timeout", cfg.Redis.Timeout.Duration, 500 * time.Millisecond},
		{"audit.rows_per_subject_minute", cfg.Audit.RowsPerSubjectMinute, 20},
		{"audit.refusal_rows_per_second", cfg.Audit.RefusalRowsPerSecond, 40},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if c.got != c.want {
				t.Fatalf("got %v, want %v", c.got, c.want)
			}
		})
	}
	wantIP := []otp.Rule{{Window: time.Minute, Max: 5}, {Window: 10 * time.Minute, Max: 30}, {Window: time.Hour, Max: 50}}
	wantPhone := []otp.Rule{{Window: time.Minute, Max: 1}, {Window: 10 * time.Minute, Max: 5}, {Window: time.Hour, Max: 10}}
	if got := rules(cfg.Limits.IP); !slices.Equal(got, wantIP) {
		t.Errorf("limits.ip = %v, want %v", got, wantIP)
	}
	if got := rules(cfg.Limits.Phone); !slices.Equal(got, wantPhone) {
		t.Errorf("limits.phone = %v, want %v", got, wantPhone)
	}
	wantVerify := []otp.Rule{{Window: time.Minute, Max: 20}, {Window: time.Hour, Max: 200}}
	if got := rules(cfg.Limits.VerifyIP); !slices.Equal(got, wantVerify) {
		t.Errorf("limits.verify_ip = %v, want %v", got, wantVerify)
	}
}

// TestDefaultTextsFitOneSegment keeps every shipped text in one SMS segment
// in the worst case the docs promise (a 6-digit code, a 12-character app
// name and a WebOTP line), and prints their sizes for docs/autofill.md
// (go test -v -run Texts ./internal/app).
func TestDefaultTextsFitOneSegment(t *testing.T) {
	cfg, err := LoadConfig("", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OTP.Length != 6 {
		t.Fatalf("otp.length = %d: the worst case below assumes 6", cfg.OTP.Length)
	}
	worst := otp.TextOptions{App: "Acme Rockets", WebOTPDomain: "example.com"}
	sizes := cfg.messages.Sizes(cfg.OTP.Length, worst)
	plain := cfg.messages.Sizes(cfg.OTP.Length, otp.TextOptions{})
	if len(sizes) < 21 || len(sizes) != len(plain) {
		t.Fatalf("%d texts (want the default and 20 languages or more): %v", len(sizes), sizes)
	}
	for i, s := range sizes {
		locale := cmp.Or(s.Locale, "default")
		t.Logf("| %s | %s | %d | %d |", locale, s.Encoding, plain[i].Units, s.Units)
		if s.Segments != 1 {
			t.Errorf("%s: %+v: want one segment with an app name and a WebOTP line", locale, s)
		}
	}
}

func TestLocaleTextsMergeWithTheDefaults(t *testing.T) {
	path := writeConfig(t, "[otp.messages]\nit = \"Il tuo codice e {{.Code}}\"\n")
	cfg, err := LoadConfig(path, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"it", "es", "fr", "de", "pt"} {
		if cfg.OTP.Messages[l] == "" {
			t.Errorf("locale %s missing from %v", l, cfg.OTP.Messages)
		}
	}
}

func TestConfigFileOverridesDefaults(t *testing.T) {
	path := writeConfig(t, `
[server]
trusted_proxies = ["10.0.0.0/8", "192.0.2.1"]

[[limits.phone]]
window = "2s"
max = 1
`)
	cfg, err := LoadConfig(path, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Limits.Phone) != 1 || cfg.Limits.Phone[0].Window.Duration != 2*time.Second {
		t.Fatalf("limits.phone = %v: a file's list must replace the defaults", cfg.Limits.Phone)
	}
	if len(cfg.Limits.IP) != 3 {
		t.Fatalf("limits.ip = %v: untouched lists keep their defaults", cfg.Limits.IP)
	}
	if len(cfg.trustedProxies) != 2 || cfg.trustedProxies[1].String() != "192.0.2.1/32" {
		t.Fatalf("trusted proxies %v", cfg.trustedProxies)
	}
	if cfg.OTP.Length != 6 {
		t.Fatal("defaults lost")
	}
}

func TestEnvironmentOverrides(t *testing.T) {
	env := map[string]string{
		"SMSGW_LISTEN":       "127.0.0.1:9999",
		"SMSGW_REDIS_URL":    "redis://10.0.0.1:6380/2",
		"SMSGW_DATABASE_URL": "postgres://u@db:5432/x",
	}
	cfg, err := LoadConfig("", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server.Listen != env["SMSGW_LISTEN"] || cfg.Redis.URL != env["SMSGW_REDIS_URL"] || cfg.Postgres.URL != env["SMSGW_DATABASE_URL"] {
		t.Fatalf("overrides not applied: %+v", cfg)
	}
}

func TestInvalidConfigNamesTheKey(t *testing.T) {
	tests := []struct{ name, body, key string }{
		{"unknown key", "[otp]\nlenght = 6\n", "otp.lenght"},
		{"unknown table", "[redis.cluster]\nnodes = 3\n", "redis.cluster"},
		{"bad duration", "[otp]\nttl = \"ten minutes\"\n", "otp.ttl: not a duration"},
		{"bad window", "[[limits.phone]]\nwindow = \"1 minute\"\nmax = 1\n", "limits.phone[0].window: not a duration"},
		{"bad second window", "[[limits.ip]]\nwindow = \"1m\"\nmax = 1\n[[limits.ip]]\nwindow = \"10 min\"\nmax = 2\n", "limits.ip[1].window"},
		{"bad days", "[audit]\nretention = \"ninety d\"\n", "audit.retention"},
		{"no rows per subject", "[audit]\nrows_per_subject_minute = 0\n", "audit.rows_per_subject_minute"},
		{"no refusal rows", "[audit]\nrefusal_rows_per_second = -1\n", "audit.refusal_rows_per_second"},
		{"cors path", "[server]\ncors_origins = [\"https://a.example/signup\"]\n", "server.cors_origins[0]"},
		{"cors no scheme", "[server]\ncors_origins = [\"a.example\"]\n", "server.cors_origins[0]"},
		{"cors wildcard among others", "[server]\ncors_origins = [\"https://a.example\", \"*\"]\n", "server.cors_origins[1]"},
		{"cors wildcard inside", "[server]\ncors_origins = [\"https://*.example.com\"]\n", "server.cors_origins[0]"},
		{"publishable without origins", "[[api.keys]]\nname = \"web\"\nsha256 = \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"\npublishable = true\n", "api.keys[0].origins"},
		{"publishable forwarding", "[[api.keys]]\nname = \"web\"\nsha256 = \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"\npublishable = true\norigins = [\"https://a.example\"]\nforward_client_ip = true\n", "api.keys[0].forward_client_ip"},
		{"publishable origin path", "[[api.keys]]\nname = \"web\"\nsha256 = \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"\npublishable = true\norigins = [\"https://a.example/x\"]\n", "api.keys[0].origins"},
		{"secret key with origins", "[[api.keys]]\nname = \"be\"\nsha256 = \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"\norigins = [\"https://a.example\"]\n", "api.keys[0].origins"},
		{"limit key name", "[[limits.key]]\nname = \"User\"\nwindow = \"1h\"\nmax = 3\n", "limits.key[0].name"},
		{"limit key built-in", "[[limits.key]]\nname = \"phone\"\nwindow = \"1h\"\nmax = 3\n", "limits.key[0].name"},
		{"limit key window twice", "[[limits.key]]\nname = \"user_id\"\nwindow = \"1h\"\nmax = 3\n[[limits.key]]\nname = \"user_id\"\nwindow = \"60m\"\nmax = 4\n", "limits.key[1] (user_id)"},
		{"limit key max", "[[limits.key]]\nname = \"user_id\"\nwindow = \"1h\"\nmax = 0\n", "limits.key[0] (user_id)"},
		{"console session", "[console]\nsession_ttl = \"10s\"\n", "console.session_ttl"},
		{"wrong type", "[otp]\nlength = \"six\"\n", "length"},
		{"code too short", "[otp]\nlength = 2\n", "otp.length"},
		{"zero attempts", "[otp]\nmax_attempts = 0\n", "otp.max_attempts"},
		{"unknown region", "[phone]\ndefault_region = \"XX\"\n", "phone.default_region"},
		{"bad listen", "[server]\nlisten = \"8080\"\n", "server.listen"},
		{"bad proxy", "[server]\ntrusted_proxies = [\"ten.0.0.0/8\"]\n", "server.trusted_proxies[0]"},
		{"bad redis url", "[redis]\nurl = \"http://x\"\n", "redis.url"},
		{"redis db not a number", "[redis]\nurl = \"redis://h:6379/zero\"\n", "redis.url"},
		{"sentinel master without sentinels", "[redis]\nsentinel_master = \"m\"\n", "redis.sentinel_addrs"},
		{"sentinels without master", "[redis]\nsentinel_addrs = [\"h:26379\"]\n", "redis.sentinel_master"},
		{"sentinel without port", "[redis]\nsentinel_master = \"m\"\nsentinel_addrs = [\"h:26379\", \"h2\"]\n", "redis.sentinel_addrs[1]"},
		{"cluster and sentinel", "[redis]\ncluster_addrs = [\"h:7000\"]\nsentinel_master = \"m\"\nsentinel_addrs = [\"h:26379\"]\n", "redis.cluster_addrs"},
		{"cluster bad port", "[redis]\ncluster_addrs = [\"h:70000\"]\n", "redis.cluster_addrs[0]"},
		{"cluster db", "[redis]\nurl = \"redis://h:1/3\"\ncluster_addrs = [\"h:7000\"]\n", "redis.url"},
		{"negative replicas", "[redis]\nmin_replicas_acked = -1\n", "redis.min_replicas_acked"},
		{"hash tag in prefix", "[redis]\nkey_prefix = \"{app}:\"\n", "redis.key_prefix"},
		{"bad postgres url", "[postgres]\nurl = \"mysql://x\"\n", "postgres.url"},
		{"window under a second", "[[limits.ip]]\nwindow = \"500ms\"\nmax = 1\n", "limits.ip[0].window"},
		{"zero max", "[[limits.phone]]\nwindow = \"1m\"\nmax = 0\n", "limits.phone[0].max"},
		{"window twice", "[[limits.phone]]\nwindow = \"1m\"\nmax = 1\n[[limits.phone]]\nwindow = \"60s\"\nmax = 2\n", "limits.phone[1].window"},
		{"unknown provider", "[sender]\nprovider = \"carrier-pigeon\"\n", "sender.provider"},
		{"fail prefix without +", "[sender.fake]\nfail_prefixes = [\"1555\"]\n", "sender.fake.fail_prefixes[0]"},
		{"ipv6 prefix", "[limits]\nipv6_prefix = 129\n", "limits.ipv6_prefix"},
		{"log level", "[log]\nlevel = \"loud\"\n", "log.level"},
		{"verify window", "[[limits.verify_ip]]\nwindow = \"0s\"\nmax = 1\n", "limits.verify_ip[0].window"},
		{"template syntax", "[otp]\nmessage = \"{{.Code\"\n", "otp.message"},
		{"template without code", "[otp]\nmessage = \"hello\"\n", "otp.message"},
		{"locale template", "[otp.messages]\nes = \"{{.Nope}}\"\n", "otp.messages.es"},
		{"webotp domain", "[otp]\nwebotp_domain = \"https://x\"\n", "otp.webotp_domain"},
		{"unknown provider in list", "[sender]\nproviders = [\"fake\", \"sns\"]\n", "sender.providers[1]"},
		{"provider twice", "[sender]\nproviders = [\"fake\", \"fake\"]\n", "sender.providers[1]"},
		{"route country", "[sender.routes]\ngb = [\"fake\"]\n", "sender.routes.gb"},
		{"route to an unused provider", "[sender.routes]\nGB = [\"twilio\"]\n", "sender.routes.GB[0]"},
		{"breaker failures", "[sender.breaker]\nfailures = 0\n", "sender.breaker.failures"},
		{"callback url", "[sender.twilio]\nstatus_callback_url = \"/v1/webhooks\"\n", "sender.twilio.status_callback_url"},
		{"not TOML", "[otp\n", "line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadConfig(writeConfig(t, tt.body), noEnv)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tt.key) {
				t.Fatalf("error %q does not name %s", err, tt.key)
			}
		})
	}
}

// A bad value from the environment names the variable, not only the key.
func TestInvalidEnvironmentNamesTheVariable(t *testing.T) {
	tests := []struct{ env, value, want string }{
		{"SMSGW_DATABASE_URL", "mysql://root:hunter2@x/db", "postgres.url (set by SMSGW_DATABASE_URL)"},
		{"SMSGW_REDIS_URL", "http://x", "redis.url (set by SMSGW_REDIS_URL)"},
		{"SMSGW_LISTEN", "8080", "server.listen (set by SMSGW_LISTEN)"},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			_, err := LoadConfig("", func(k string) string {
				if k == tt.env {
					return tt.value
				}
				return ""
			})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one naming %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("error %q shows the URL's password", err)
			}
		})
	}
}

func TestCORSOrigins(t *testing.T) {
	path := writeConfig(t, "[server]\ncors_origins = [\"https://Signup.Example.com\", \"http://localhost:3000\"]\n")
	cfg, err := LoadConfig(path, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"https://signup.example.com", "http://localhost:3000"}
	if !slices.Equal(cfg.corsOrigins, want) {
		t.Fatalf("cors origins %v, want %v", cfg.corsOrigins, want)
	}
}

func TestRegionConfig(t *testing.T) {
	for _, tc := range []struct {
		name, toml, wantKey string
	}{
		{"one region by default", "", ""},
		{"homes without a name", "[region.homes]\nGB = \"eu\"\n", "region.name"},
		{"a bad name", "[region]\nname = \"EU West\"\n", "region.name"},
		{"an unknown home", "[region]\nname = \"eu\"\n[region.homes]\nGB = \"us\"\n", "region.homes.GB"},
		{"an unknown country", "[region]\nname = \"eu\"\n[region.homes]\nXX = \"eu\"\n", "region.homes.XX"},
		{"an unknown default", "[region]\nname = \"eu\"\ndefault_home = \"us\"\n", "region.default_home"},
		{"a negative fallback", "[region]\nname = \"eu\"\nfallback = -1\n", "region.fallback"},
		{"its own Redis listed", "[region]\nname = \"eu\"\n[region.redis.eu]\nurl = \"redis://127.0.0.1:6379/0\"\n", ""},
		{"its own Redis listed and [redis] the same", "[redis]\nurl = \"redis://10.0.0.9:6379/0\"\n[region]\nname = \"eu\"\n[region.redis.eu]\nurl = \"redis://10.0.0.9:6379/0\"\n", ""},
		{"its own Redis listed and [redis] another", "[redis]\nurl = \"redis://10.0.0.8:6379/0\"\n[region]\nname = \"eu\"\n[region.redis.eu]\nurl = \"redis://10.0.0.9:6379/0\"\n", "region.redis.eu.url"},
		{"its own Redis listed and [redis] another prefix", "[redis]\nkey_prefix = \"a:\"\n[region]\nname = \"eu\"\n[region.redis.eu]\nurl = \"redis://10.0.0.9:6379/0\"\nkey_prefix = \"b:\"\n", "region.redis.eu.key_prefix"},
		{"another region's Redis without an address", "[region]\nname = \"eu\"\n[region.redis.us]\ntimeout = \"1s\"\n", "region.redis.us.url"},
		{"an unknown previous home", "[region]\nname = \"eu\"\n[region.previous_homes]\nGB = \"ap\"\n", "region.previous_homes.GB"},
		{"another region's Cluster without a url", "[region]\nname = \"eu\"\n[region.redis.us]\ncluster_addrs = [\"10.0.0.1:6379\"]\n", ""},
		{"a valid deployment", "[region]\nname = \"eu\"\ndefault_home = \"us\"\nfallback = 1\n[region.homes]\ngb = \"eu\"\n[region.previous_homes]\nGB = \"us\"\n[region.redis.us]\nurl = \"redis://10.0.0.1:6379/0\"\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "smsgw.toml")
			if err := os.WriteFile(path, []byte(tc.toml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := LoadConfig(path, func(string) string { return "" })
			if err == nil {
				err = cfg.validate()
			}
			switch {
			case tc.wantKey == "" && err != nil:
				t.Fatalf("valid config refused: %v", err)
			case tc.wantKey != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantKey+":") && !strings.Contains(err.Error(), " "+tc.wantKey+":")):
				t.Fatalf("got %v, want an error naming %s", err, tc.wantKey)
			}
		})
	}
}

// TestExampleConfigsLoad holds the configs under examples/ to the validator,
// so a page's or a demo's config cannot drift from what smsgw accepts.
func TestExampleConfigsLoad(t *testing.T) {
	paths, err := filepath.Glob("../../examples/*/*.toml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no example configs: %v", err)
	}
	more, _ := filepath.Glob("../../examples/*.toml")
	for _, p := range append(paths, more...) {
		if _, err := LoadConfig(p, noEnv); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// regionsDocFile is docs/regions.md's file for every region (the toml
// block after the line naming TestOneFileForEveryRegion), as printed.
func regionsDocFile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/regions.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "TestOneFileForEveryRegion")
	_, rest, ok2 := strings.Cut(rest, "```toml\n")
	block, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/regions.md has no toml block after the line naming TestOneFileForEveryRegion")
	}
	return block
}

// One file serves every region: SMSGW_REGION picks the name, that region's
// entry is its Redis and the others are the other regions; without a name
// the file is refused naming region.name, and a SMSGW_REDIS_URL naming
// another server than the region's own entry is refused naming that entry.
func TestOneFileForEveryRegion(t *testing.T) {
	path := writeConfig(t, regionsDocFile(t))
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	for _, tc := range []struct {
		region, url string
		timeout     time.Duration
		others      []string
	}{
		{"eu-west", "rediss://redis.eu-west.internal:6379/0", 500 * time.Millisecond, []string{"ap-south", "us-east"}},
		{"us-east", "rediss://redis.us-east.internal:6379/0", 500 * time.Millisecond, []string{"ap-south", "eu-west"}},
		{"ap-south", "rediss://redis.ap-south.internal:6379/0", 500 * time.Millisecond, []string{"eu-west", "us-east"}},
	} {
		cfg, err := LoadConfig(path, env(map[string]string{"SMSGW_REGION": tc.region}))
		if err != nil {
			t.Fatalf("%s: %v", tc.region, err)
		}
		others := slices.Sorted(maps.Keys(cfg.Region.Redis))
		if cfg.Region.Name != tc.region || cfg.Redis.URL != tc.url || cfg.Redis.Timeout.Duration != tc.timeout || !slices.Equal(others, tc.others) {
			t.Fatalf("SMSGW_REGION=%s: name %q, redis %q (timeout %s), other regions %v; want %q (%s), %v",
				tc.region, cfg.Region.Name, cfg.Redis.URL, cfg.Redis.Timeout.Duration, others, tc.url, tc.timeout, tc.others)
		}
	}
	if _, err := LoadConfig(path, noEnv); err == nil || !strings.HasPrefix(err.Error(), "config: region.name:") {
		t.Fatalf("no region named: got %v, want an error naming region.name", err)
	}
	_, err := LoadConfig(path, env(map[string]string{"SMSGW_REGION": "eu-west", "SMSGW_REDIS_URL": "redis://10.9.0.5:6379/0"}))
	if err == nil || !strings.Contains(err.Error(), "region.redis.eu-west.url:") {
		t.Fatalf("SMSGW_REDIS_URL against the region's own entry: got %v, want an error naming region.redis.eu-west.url", err)
	}
	if _, err := LoadConfig(path, env(map[string]string{"SMSGW_REGION": "eu-west", "SMSGW_REDIS_URL": "rediss://redis.eu-west.internal:6379/0"})); err != nil {
		t.Fatalf("SMSGW_REDIS_URL naming the region's own entry: %v", err)
	}
}
