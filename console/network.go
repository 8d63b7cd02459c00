package console

import (
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"smsgw/otp"
)

// network is one of the address ranges an IP belongs to, widest last.
type network struct {
	Prefix  netip.Prefix
	Counted bool              // the limits count this one
	Holds   []otp.PumpingHold // the pumping rules' counts of this network, held or near
}

type networkData struct {
	Query    string
	Counted  string
	Networks []network
	Windows  []windowRow
	Trail    []otp.AuditEvent
	TrailErr string
}

// wider lists the networks operators reason about for an address: the
// address itself, then the /24 and /16 (IPv4) or the /64, /48 and /32 (IPv6).
func wider(addr netip.Addr) []netip.Prefix {
	bits := []int{32, 24, 16}
	if !addr.Is4() {
		bits = []int{128, 64, 48, 32}
	}
	out := make([]netip.Prefix, 0, len(bits))
	for _, b := range bits {
		p, _ := addr.Prefix(b)
		out = append(out, p)
	}
	return out
}

// networkPage looks an IP address up: the network its limits count, its
// windows, the wider networks and their pumping budgets, its audit trail.
func (c *Console) networkPage(w http.ResponseWriter, r *http.Request, a *action) error {
	ctx := r.Context()
	d := networkData{Query: strings.TrimSpace(r.URL.Query().Get("ip"))}
	p := page{Title: "Network look-up", Nav: "network", Notice: notices[r.URL.Query().Get("done")], Data: &d}
	if d.Query == "" {
		c.render(w, r, http.StatusOK, "network", &a.sess, p)
		return nil
	}
	err := func() error {
		addr, err := netip.ParseAddr(d.Query)
		if err != nil {
			return otp.Errorf(otp.EInvalidRequest, "%q is not an IP address", d.Query)
		}
		addr = addr.Unmap().WithZone("")
		a.target = addr.String() // the row's client_ip is the operator's own
		v, err := c.d.Support.Limits(ctx, "", addr.String())
		if err != nil {
			return err
		}
		d.Counted, d.Windows = v.IP, windowRows(v)
		var counted []otp.PumpingHold
		if c.d.Pumping != nil {
			held, near, err := c.d.Pumping.Holds(ctx)
			if err == nil {
				counted = append(held, near...)
			}
		}
		for _, pf := range wider(addr) {
			n := network{Prefix: pf, Counted: pf.String() == v.IP || (pf.Bits() == addr.BitLen() && addr.String() == v.IP)}
			for _, h := range counted {
				if h.Subject == pf.String() {
					n.Holds = append(n.Holds, h)
				}
			}
			d.Networks = append(d.Networks, n)
		}
		if c.d.Audit != nil {
			counted, err := netip.ParsePrefix(v.IP)
			if err != nil {
				counted = netip.PrefixFrom(addr, addr.BitLen())
			}
			trail, err := c.d.Audit.Search(ctx, otp.AuditQuery{IP: counted, Limit: 50})
			if err != nil {
				d.TrailErr = "the audit log is unavailable right now"
			}
			d.Trail = trail
		}
		return nil
	}()
	return c.renderResult(w, r, "network", &a.sess, p, err)
}

// networkReset clears an address's windows.
func (c *Console) networkReset(w http.ResponseWriter, r *http.Request, a *action) error {
	raw := strings.TrimSpace(r.PostFormValue("ip"))
	addr, err := netip.ParseAddr(raw)
	if err != nil {
		return otp.Errorf(otp.EInvalidRequest, "%q is not an IP address", raw)
	}
	a.target = addr.String()
	if _, err := c.d.Support.ResetLimits(r.Context(), "", addr.String()); err != nil {
		return err
	}
	http.Redirect(w, r, "/console/network?ip="+url.QueryEscape(addr.String())+"&done=reset", http.StatusSeeOther)
	return nil
}
