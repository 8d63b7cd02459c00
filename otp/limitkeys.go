package otp

import (
	"context"
	"fmt"
	"slices"
)

// KeyScope is the scope of a caller-defined limit key's windows: a 429
// names it with the key's name in "key".
const KeyScope = "key"

// maxKeyValue is the longest limit-key value accepted, in bytes.
const maxKeyValue = 128

// KeyRules are the windows of one caller-defined limit key ([[limits.key]]
// entries sharing a name): a subject the caller names per request (an
// account, a session, a device), counted like an address.
type KeyRules struct {
	Name  string
	Rules []Rule
}

// builtinScopes are the scopes smsgw counts itself: a limit key may not take
// their names, so a 429's scope and policy items stay unambiguous.
var builtinScopes = []string{"ip", "phone", "country", "prefix", "global", KeyScope, "verify"}

// ValidKeyName tells whether name may name a limit key: lowercase letters,
// digits and "_", at most 32 bytes, not a built-in scope.
func ValidKeyName(name string) error {
	if name == "" || len(name) > 32 {
		return fmt.Errorf("want 1 to 32 lowercase letters, digits or \"_\", got %q", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return fmt.Errorf("want lowercase letters, digits or \"_\", got %q", name)
		}
	}
	if slices.Contains(builtinScopes, name) {
		return fmt.Errorf("%q is a built-in scope", name)
	}
	return nil
}

// keySubjects are the windows of the limit keys a request names, in the
// configuration's order. A name not configured, or a value that is empty or
// over 128 bytes, is 400 naming the key: nothing is counted.
func (s *Service) keySubjects(keys map[string]string) ([]Subject, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	for name := range keys {
		if !slices.ContainsFunc(s.cfg.KeyRules, func(k KeyRules) bool { return k.Name == name }) {
			return nil, Errorf(EInvalidRequest, "limit_keys: %q is not a configured limit key ([[limits.key]])", name)
		}
	}
	out := make([]Subject, 0, len(keys))
	for _, k := range s.cfg.KeyRules {
		value, ok := keys[k.Name]
		if !ok {
			continue
		}
		if len(value) == 0 || len(value) > maxKeyValue {
			return nil, Errorf(EInvalidRequest, "limit_keys: the value of %q must be 1 to %d bytes", k.Name, maxKeyValue)
		}
		out = append(out, s.KeySubject(k, value))
	}
	return out, nil
}

// KeySubject is the subject of one value of a limit key. Its Redis key
// holds an HMAC of the value, never the value; it has no Country, so it
// lives where the request is answered, like an address.
func (s *Service) KeySubject(k KeyRules, value string) Subject {
	return Subject{Scope: KeyScope, Name: k.Name, Rules: k.Rules,
		Key: "send:key:" + k.Name + ":" + s.Secrets.SubjectMAC(k.Name, value)}
}

// LimitKey is the configured limit key called name.
func (s *Service) LimitKey(name string) (KeyRules, bool) {
	i := slices.IndexFunc(s.cfg.KeyRules, func(k KeyRules) bool { return k.Name == name })
	if i < 0 {
		return KeyRules{}, false
	}
	return s.cfg.KeyRules[i], true
}

// LimitKeyNames are the configured limit keys' names, in config order.
func (s *Service) LimitKeyNames() []string {
	names := make([]string, len(s.cfg.KeyRules))
	for i, k := range s.cfg.KeyRules {
		names[i] = k.Name
	}
	return names
}

// requestSubjects are what a send is counted against: the built-in subjects
// and the limit keys it names.
func (s *Service) requestSubjects(phone Phone, req SendRequest) []Subject {
	subjects := s.SendSubjects(phone, req.ClientIP)
	return append(subjects, req.keySubjects...)
}

// KeyLimits shows the windows of one value of a limit key (the support
// desk's look-up); with reset, it first forgets their admitted requests.
func (s *Service) KeyLimits(ctx context.Context, name, value string, reset bool) (SupportView, error) {
	k, ok := s.LimitKey(name)
	if !ok {
		return SupportView{}, Errorf(EInvalidRequest, "key: %q is not a configured limit key ([[limits.key]])", name)
	}
	if len(value) == 0 || len(value) > maxKeyValue {
		return SupportView{}, Errorf(EInvalidRequest, "value: give the value of %q, 1 to %d bytes", name, maxKeyValue)
	}
	subjects := []Subject{s.KeySubject(k, value)}
	if reset {
		if err := s.Limiter.Reset(ctx, subjects); err != nil {
			return SupportView{}, unavailable("limiter", err)
		}
	}
	windows, err := s.Limiter.Status(ctx, subjects)
	if err != nil {
		return SupportView{}, unavailable("limiter", err)
	}
	v := SupportView{Key: name}
	for _, w := range windows {
		v.Windows = append(v.Windows, LimitWindow{Policy: "send", Window: w})
	}
	return v, nil
}
