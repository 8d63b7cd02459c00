package pumping

// approve.lua and release.lua as the reference model (see model.go).

// modelApprove credits an approved code to the destination group d: the
// number becomes a returning user (its block's hash, when returning
// numbers are kept: keepMs > 0), and, once per counted text, every range
// and what its text counted in at its operator and country (record bits u,
// k, f). It returns whether the caller's networks are to be credited, and
// the network the record names.
func modelApprove(tx *modelTx, d group, c modelClock, tail string, keepMs int64) (bool, string) {
	var ranges []string
	var signed []subject
	ret := d.record + ":none"
	for _, s := range d.subjects {
		if s.kind == 'c' {
			signed, ret = append(signed, s), s.ret
		} else {
			ranges = append(ranges, s.key)
		}
	}
	rec := d.record
	if len(signed) > 0 && keepMs > 0 && tail != "" {
		// A returning user whatever the record says: the code was approved.
		tx.hset(ret, tail, float64(c.now/86400000))
		tx.pexpire(ret, keepMs, c.now)
	}
	h, ok := tx.num(rec, fieldRecBucket)
	if !ok || h < float64(c.oldest) {
		return false, "" // no counted text in the window
	}
	netid, _ := tx.hget(rec, fieldRecNetwork)
	_, verified := tx.hget(rec, fieldRecApproved)
	_, w := tx.hget(rec, fieldRecOwed)
	_, u := tx.hget(rec, fieldRecCountry)
	_, k := tx.hget(rec, fieldRecChallenge)
	_, f := tx.hget(rec, fieldRecForeign)
	// The number's resends start afresh.
	tx.hdel(rec, fieldRecResends)
	if verified {
		// Approved before in this window: the ranges and the country counted
		// the number once and were credited; a later text's networks were not.
		if w {
			tx.hdel(rec, fieldRecOwed)
			return true, netid
		}
		return false, ""
	}
	tx.hset(rec, fieldRecApproved, 1.0)
	for _, s := range signed {
		if u {
			c.credit(tx, s.key)
		}
		if k {
			c.credit(tx, s.challenged)
		}
		if f {
			c.credit(tx, s.foreign)
		}
	}
	for _, key := range ranges {
		c.credit(tx, key)
	}
	return true, netid
}

// modelApproveNetworks credits the caller group's networks and their
// ledgers of texts to the country.
func modelApproveNetworks(tx *modelTx, callerKeys []string, c modelClock) {
	for _, k := range callerKeys {
		c.credit(tx, k)
	}
}

// modelRelease takes back a send decide counted but that was never texted
// (another group refused it, the windows did, the provider sent nothing):
// grp and the counted call's reply (bucket, recorded: 1 the phone counted
// anew, 2 a resend counted again, 3 the caller's networks of a free resend
// on Cluster, their budgets alone; cnew what an operator and country
// counted). Only a bucket still in the window has a count to take back.
func modelRelease(tx *modelTx, grp group, bucket, recorded, cnew int64) {
	x := sField(bucket)
	takeBack := func(key string, amount int64) {
		if _, ok := tx.hget(key, x); ok {
			tx.hincrby(key, x, -amount)
			tx.hincrby(key, fieldTexts, -amount)
		}
	}
	rec := grp.record
	anew, again := recorded == 1, recorded == 2
	for _, s := range grp.subjects {
		switch s.kind {
		case 'c':
			if rec != "" && !anew && !again {
				if cnew&1 != 0 {
					tx.hdel(rec, fieldRecCountry)
				}
				if cnew&2 != 0 {
					tx.hdel(rec, fieldRecChallenge)
				}
				if cnew&4 != 0 {
					tx.hdel(rec, fieldRecForeign)
				}
			}
			if cnew&1 != 0 {
				takeBack(s.key, 1)
			}
			if cnew&2 != 0 {
				takeBack(s.challenged, 1)
			}
			if cnew&4 != 0 {
				takeBack(s.foreign, 1)
			}
		case 'r':
			if anew {
				takeBack(s.key, 1)
			}
		case 'm':
			takeBack(s.key, s.price)
		default:
			// A free resend (a record counted before: recorded 0) counted
			// neither its ranges nor, in the same call, the caller's
			// networks' budgets, only their ledgers to the country.
			keys := []string{s.key, s.sub}
			switch {
			case rec != "" && recorded == 0:
				keys = []string{s.sub}
			case recorded == freeResendNetworks:
				keys = []string{s.key}
			}
			for _, k := range keys {
				if k != "" {
					takeBack(k, 1)
				}
			}
		}
	}
	switch {
	case rec != "" && anew:
		tx.del(rec)
	case rec != "":
		// Not texted: not one of the number's resends either.
		if t, ok := tx.num(rec, fieldRecResends); ok && t > 0 {
			tx.hset(rec, fieldRecResends, t-1)
		}
	}
}
