package api

import (
	"net/netip"

	"github.com/labstack/echo/v4"

	"smsgw/otp"
)

// forwardedClient is the address every limit and pumping rule of a send or
// verify counts: the end user's "client_ip" when a backend whose API key has
// forward_client_ip = true sends one, else the caller's own (peer).
func forwardedClient(c echo.Context, raw string, peer netip.Addr) (netip.Addr, error) {
	if raw == "" {
		return peer, nil
	}
	if publishableKey(c) {
		return peer, otp.Errorf(otp.EInvalidRequest,
			"client_ip is never accepted with a publishable key: a browser's limits count its own address")
	}
	if ok, _ := c.Get(ctxForwards).(bool); !ok {
		return peer, otp.Errorf(otp.EInvalidRequest,
			"client_ip is accepted only from a backend whose API key has forward_client_ip = true ([[api.keys]])")
	}
	a, err := netip.ParseAddr(raw)
	if err != nil || a.Zone() != "" {
		return peer, otp.Errorf(otp.EInvalidRequest, "client_ip must be an IPv4 or IPv6 address such as \"203.0.113.7\"")
	}
	return a.Unmap(), nil
}
