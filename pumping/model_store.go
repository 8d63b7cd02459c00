package pumping

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// modelStore is what Redis holds for the reference model (model.go): the
// hashes the scripts keep, as strings, and the time each key expires at on
// the model's clock (absent: it never expires). The model never touches a
// store directly: a step reads and writes through a modelTx, which the
// caller commits.
type modelStore struct {
	hashes  map[string]map[string]string
	expires map[string]int64 // ms
}

func newModelStore() *modelStore {
	return &modelStore{hashes: map[string]map[string]string{}, expires: map[string]int64{}}
}

// expire drops the keys whose time passed by now, as Redis would.
func (s *modelStore) expire(now int64) []string {
	var gone []string
	for k, at := range s.expires {
		if at <= now {
			gone = append(gone, k)
			delete(s.hashes, k)
			delete(s.expires, k)
		}
	}
	slices.Sort(gone)
	return gone
}

// modelTx is one script call's view of the store: its reads see its own
// writes, its writes stay apart until commit, and log lists them as the
// Redis commands the script would send (for a failing test's report).
type modelTx struct {
	base    *modelStore
	hashes  map[string]map[string]string // touched keys' whole new contents; nil: deleted
	expires map[string]int64             // touched keys' new expiry; -1: none
	log     []string
}

func (s *modelStore) begin() *modelTx {
	return &modelTx{base: s, hashes: map[string]map[string]string{}, expires: map[string]int64{}}
}

// commit writes the call's effects into the store.
func (t *modelTx) commit() {
	for k, h := range t.hashes {
		if h == nil {
			delete(t.base.hashes, k)
		} else {
			t.base.hashes[k] = h
		}
	}
	for k, at := range t.expires {
		if at < 0 {
			delete(t.base.expires, k)
		} else {
			t.base.expires[k] = at
		}
	}
}

// hash is key's current contents (nil: no key), not to be changed.
func (t *modelTx) hash(key string) map[string]string {
	if h, ok := t.hashes[key]; ok {
		return h
	}
	return t.base.hashes[key]
}

// own is key's contents for writing: a key made anew has no expiry.
func (t *modelTx) own(key string) map[string]string {
	if h := t.hashes[key]; h != nil {
		return h
	}
	h := maps.Clone(t.hash(key))
	if h == nil {
		h = map[string]string{}
		t.expires[key] = -1
	}
	t.hashes[key] = h
	return h
}

func (t *modelTx) note(cmd string, key string, args ...string) {
	t.log = append(t.log, cmd+" "+key+" "+strings.Join(args, " "))
}

// hget is HGET: ok false for a missing field (Lua's false).
func (t *modelTx) hget(key, field string) (string, bool) {
	v, ok := t.hash(key)[field]
	return v, ok
}

// num is Lua's tonumber of HGET: ok false for a missing field.
func (t *modelTx) num(key, field string) (float64, bool) {
	v, ok := t.hget(key, field)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	return f, err == nil
}

// numOr is tonumber(...) or def.
func (t *modelTx) numOr(key, field string, def float64) float64 {
	if v, ok := t.num(key, field); ok {
		return v
	}
	return def
}

func (t *modelTx) exists(key string) bool { return t.hash(key) != nil }

// hset is HSET key field value ...: values are Lua numbers or strings.
func (t *modelTx) hset(key string, kv ...any) {
	h := t.own(key)
	args := make([]string, len(kv))
	for i := 0; i+1 < len(kv); i += 2 {
		f, v := luaString(kv[i]), luaString(kv[i+1])
		h[f] = v
		args[i], args[i+1] = f, v
	}
	t.note("HSET", key, args...)
}

// hincrby is HINCRBY.
func (t *modelTx) hincrby(key, field string, by int64) {
	cur, _ := strconv.ParseInt(t.hash(key)[field], 10, 64)
	t.own(key)[field] = strconv.FormatInt(cur+by, 10)
	t.note("HINCRBY", key, field, strconv.FormatInt(by, 10))
}

// hdel is HDEL: a hash left empty is no key, and loses its expiry.
func (t *modelTx) hdel(key string, fields ...string) {
	if !t.exists(key) {
		return
	}
	h := t.own(key)
	for _, f := range fields {
		delete(h, f)
	}
	t.note("HDEL", key, fields...)
	if len(h) == 0 {
		t.hashes[key], t.expires[key] = nil, -1
	}
}

// del is DEL.
func (t *modelTx) del(key string) {
	if t.exists(key) {
		t.hashes[key], t.expires[key] = nil, -1
		t.note("DEL", key)
	}
}

// pexpire is PEXPIRE: nothing on a missing key.
func (t *modelTx) pexpire(key string, ms, now int64) {
	if t.exists(key) {
		t.expires[key] = now + ms
		t.note("PEXPIRE", key, strconv.FormatInt(ms, 10))
	}
}

// pttl is PTTL: -2 no key, -1 no expiry. The scripts ask it only of a
// key with an expiry but no field x, which no script of this version
// leaves (data written before x was kept). Redis answers it on its own
// clock, so it agrees with the scripts' now only when now is Redis TIME,
// as in the service; under a test clock (TestMatchesReferenceModel) the
// two differ, and the call is logged for the harness to refuse.
func (t *modelTx) pttl(key string, now int64) int64 {
	if !t.exists(key) {
		return -2
	}
	at, ok := t.expires[key]
	if !ok {
		at, ok = t.base.expires[key]
	}
	if !ok || at < 0 {
		return -1
	}
	t.note("PTTL", key, strconv.FormatInt(at-now, 10))
	return at - now
}

// hkeys is HKEYS, sorted.
func (t *modelTx) hkeys(key string) []string {
	return slices.Sorted(maps.Keys(t.hash(key)))
}

// luaString is how Redis stores a Lua value passed to redis.call: a number
// as its shortest exact digits.
func luaString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'g', 17, 64)
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	}
	panic(fmt.Sprintf("luaString: %T", v))
}
