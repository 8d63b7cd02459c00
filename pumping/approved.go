package pumping

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"

	"smsgw/otp"
)

// Sent counts a text the provider accepted, and its estimated cost.
func (g *Guard) Sent(phone otp.Phone) {
	c := countryOf(phone)
	g.m.texts.WithLabelValues(c).Inc()
	g.m.spend.WithLabelValues(c).Add(float64(g.cfg.Spend.price(c)) / 1e6)
	if name, _, ok := operatorOf(phone); ok {
		g.m.opTexts.WithLabelValues(c, name).Inc()
	}
}

// Approved credits the destination, then the networks that asked for the
// text (kept in the phone's record; they may differ from the verifier's).
func (g *Guard) Approved(ctx context.Context, phone otp.Phone) error {
	g.m.approvals.WithLabelValues(countryOf(phone)).Inc()
	if name, _, ok := operatorOf(phone); ok {
		g.m.opApprovals.WithLabelValues(countryOf(phone), name).Inc()
	}
	if g.cfg.Mode == ModeOff {
		return nil
	}
	d := g.destination(phone)
	_, tail := returningBlock(phone)
	keys, signed := g.approvalKeys(d)
	args := []any{g.redisNow(ctx), ms(bucket), int64(g.cfg.Window / bucket), phone.E164, "d",
		tail + " " + strconv.FormatInt(ms(g.cfg.ReturningFor), 10) + " " + strconv.Itoa(signed)}
	v, err := g.scriptsFor(d, phone.Country()).Run(ctx, approveScript, keys, args...).Result()
	if err != nil {
		return fmt.Errorf("pumping: approve: %w", err)
	}
	r, err := parseApproveReply(v)
	if err != nil {
		return fmt.Errorf("pumping: approve: %w", err)
	}
	if !r.credited || r.netid == "" {
		return nil
	}
	ip, err := netip.ParseAddr(r.netid)
	if err != nil {
		return nil // a record from another version: nothing to credit
	}
	c := g.caller(ip, countryOf(phone))
	if len(c.subjects) == 0 {
		return nil
	}
	args[4] = "n"
	if err := g.scripts.Run(ctx, approveScript, c.keys(), args...).Err(); err != nil {
		return fmt.Errorf("pumping: approve networks: %w", err)
	}
	return nil
}

// approvalKeys are the destination group's keys with the phone's returning
// block last, as approve.lua reads them (the subjects that take signs, the
// operator and the country when on, just before it, three keys each), and
// how many such subjects there are; a group without them still passes a
// block (never written) to keep the shape.
func (g *Guard) approvalKeys(d group) ([]string, int) {
	keys := []string{d.record}
	ret := d.record + ":none"
	signed := 0
	for _, s := range d.subjects {
		if s.kind == 'c' {
			ret = s.ret
			continue
		}
		keys = append(keys, s.key)
	}
	for _, s := range d.subjects {
		if s.kind == 'c' {
			keys = append(keys, s.key, s.challenged, s.foreign)
			signed++
		}
	}
	return append(keys, ret), signed
}

// approveReply is approve.lua's reply, read: whether the destination was
// credited, and the caller network its record names (to credit next).
type approveReply struct {
	credited bool
	netid    string
}

// parseApproveReply reads approve.lua's reply {credited (0 or 1), network
// id}.
func parseApproveReply(v any) (approveReply, error) {
	vals, ok := v.([]any)
	if !ok || len(vals) != 2 {
		return approveReply{}, fmt.Errorf("unexpected reply %v", v)
	}
	credited, ok1 := vals[0].(int64)
	netid, ok2 := vals[1].(string)
	if !ok1 || !ok2 || credited < 0 || credited > 1 {
		return approveReply{}, fmt.Errorf("unexpected reply %v", v)
	}
	return approveReply{credited: credited == 1, netid: netid}, nil
}
