package api

import (
	"slices"

	"github.com/labstack/echo/v4"

	"smsgw/otp"
)

// limitKeysAllowed refuses "limit_keys" from any caller but a backend with a
// secret API key: a page (publishable key) or an anonymous caller could name
// a fresh value per request and so count nothing. The message names the
// key; whether it is configured is the domain's check.
func limitKeysAllowed(c echo.Context, keys map[string]string) error {
	if len(keys) == 0 {
		return nil
	}
	names := make([]string, 0, len(keys))
	for n := range keys {
		names = append(names, n)
	}
	slices.Sort(names)
	switch {
	case apiKeyName(c) == "":
		return otp.Errorf(otp.EInvalidRequest, "limit_keys (%q) is accepted only with a secret API key ([[api.keys]])", names[0])
	case publishableKey(c):
		return otp.Errorf(otp.EInvalidRequest, "limit_keys (%q) is never accepted with a publishable key: a page's limits count its own address", names[0])
	}
	return nil
}
