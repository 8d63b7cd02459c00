package app

import (
	"encoding/hex"
	"fmt"
	"slices"

	"smsgw/api"
)

// apiKeys checks [[api.keys]]: unique names, a SHA-256 each, and the
// publishable (browser) keys' origins. A publishable key is seen by anyone
// who opens its page, so it may forward nothing on anyone's behalf.
func apiKeys(in []APIKey) ([]api.APIKey, error) {
	var out []api.APIKey
	names := map[string]bool{}
	for i, k := range in {
		if k.Name == "" || names[k.Name] {
			return nil, fmt.Errorf("api.keys[%d].name: must be set and unique", i)
		}
		names[k.Name] = true
		sum, err := hex.DecodeString(k.SHA256)
		if err != nil || len(sum) != 32 {
			return nil, fmt.Errorf("api.keys[%d].sha256: want the key's SHA-256 as 64 hex digits (printf %%s \"$KEY\" | sha256sum)", i)
		}
		key := api.APIKey{Name: k.Name, SHA256: [32]byte(sum), Enabled: k.Enabled,
			ForwardClientIP: k.ForwardClientIP, Publishable: k.Publishable}
		if err := publishableOrigins(i, k, &key); err != nil {
			return nil, err
		}
		if key.Text, err = keyText(i, k); err != nil {
			return nil, err
		}
		out = append(out, key)
	}
	return out, nil
}

func publishableOrigins(i int, k APIKey, key *api.APIKey) error {
	if !k.Publishable {
		if len(k.Origins) > 0 {
			return fmt.Errorf("api.keys[%d].origins: only a publishable key (publishable = true) is bound to origins", i)
		}
		return nil
	}
	if k.ForwardClientIP {
		return fmt.Errorf("api.keys[%d].forward_client_ip: a publishable key is seen by every visitor of its page and may not forward client_ip", i)
	}
	if len(k.Origins) == 0 || slices.Contains(k.Origins, "*") {
		return fmt.Errorf("api.keys[%d].origins: a publishable key needs the exact origins of its pages, like [\"https://signup.example.com\"]", i)
	}
	origins, err := corsOrigins(k.Origins)
	if err != nil {
		return fmt.Errorf("api.keys[%d].origins: %w", i, err)
	}
	key.Origins = origins
	return nil
}

// browserOrigins are the origins whose pages may call smsgw: the ones
// server.cors_origins lists and every publishable key's, so a page's key and
// its CORS answer are configured in one place.
func browserOrigins(cors []string, keys []api.APIKey) []string {
	out := slices.Clone(cors)
	for _, k := range keys {
		for _, o := range k.Origins {
			if !slices.Contains(out, o) {
				out = append(out, o)
			}
		}
	}
	return out
}
