package app

import (
	"strings"
	"testing"
)

// TestDevConfig: -dev texts through the fake provider and runs the pumping
// rules in shadow mode unless the config names a mode; it refuses a real
// provider and any listen address beyond loopback; serving names one.
func TestDevConfig(t *testing.T) {
	tests := []struct {
		name     string
		file     string
		mode     string
		provider string
		wantErr  string
	}{
		{"defaults", "", "shadow", "fake", ""},
		{"a mode named", "[pumping]\nmode = \"enforce\"\n", "enforce", "fake", ""},
		{"rules off", "[pumping]\nmode = \"off\"\n", "off", "fake", ""},
		{"fake named", "[sender]\nprovider = \"fake\"\n", "shadow", "fake", ""},
		{"a real provider", "[sender]\nprovider = \"http\"\n[sender.http]\nurl = \"https://sms.internal/send\"\n", "", "", "-dev always uses the fake provider"},
		{"beyond loopback", "[server]\nlisten = \"0.0.0.0:8080\"\n", "", "", "loopback only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.file != "" {
				path = writeConfig(t, tt.file)
			}
			cfg, err := LoadConfig(path, noEnv)
			if err != nil {
				t.Fatal(err)
			}
			dev, err := devConfig(cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if dev.Pumping.Mode != tt.mode || dev.Sender.Provider != tt.provider {
				t.Fatalf("mode %q provider %q, want %q %q", dev.Pumping.Mode, dev.Sender.Provider, tt.mode, tt.provider)
			}
			if cfg.Pumping.Mode == "shadow" && tt.file == "" {
				t.Fatal("devConfig changed the config it was given")
			}
			if !strings.Contains(devBannerFor(dev.Pumping.Mode), map[string]string{"shadow": "SHADOW", "enforce": "ENFORCED", "off": "OFF"}[tt.mode]) {
				t.Fatalf("banner for %s:\n%s", tt.mode, devBannerFor(dev.Pumping.Mode))
			}
		})
	}
	t.Run("serving names a provider", func(t *testing.T) {
		cfg, err := LoadConfig("", noEnv)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkProviderNamed(cfg); err == nil || !strings.Contains(err.Error(), "sender.provider") {
			t.Fatalf("error %v", err)
		}
		cfg.Sender.Providers = []string{"fake"}
		if err := checkProviderNamed(cfg); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFakeProviderShadowsPumping: outside -dev, the fake provider alone with
// no [pumping] mode named runs the rules in shadow mode (its texts cost
// nothing); a mode named, or a real provider, keeps the configured mode.
func TestFakeProviderShadowsPumping(t *testing.T) {
	for _, tt := range []struct {
		name, file, mode string
		shadowed         bool
	}{
		{"fake, no mode", "[sender]\nprovider = \"fake\"\n", "shadow", true},
		{"fake in a list, no mode", "[sender]\nproviders = [\"fake\"]\n", "shadow", true},
		{"fake, enforce named", "[sender]\nprovider = \"fake\"\n[pumping]\nmode = \"enforce\"\n", "enforce", false},
		{"a real provider", "[sender]\nprovider = \"http\"\n[sender.http]\nurl = \"https://sms.internal/send\"\n", "enforce", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := LoadConfig(writeConfig(t, tt.file), noEnv)
			if err != nil {
				t.Fatal(err)
			}
			got := fakeShadow(cfg)
			if got.pumping().Mode != tt.mode || got.shadowedForFake != tt.shadowed {
				t.Fatalf("mode %q (shadowed for fake %v), want %q (%v)", got.pumping().Mode, got.shadowedForFake, tt.mode, tt.shadowed)
			}
			if tt.shadowed && cfg.Pumping.Mode != "" {
				t.Fatal("fakeShadow changed the config it was given")
			}
		})
	}
}
