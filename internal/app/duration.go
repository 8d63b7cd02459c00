package app

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Duration reads "500ms", "10m", "1h" and whole days like "90d" from TOML.
// A value that is not a duration is kept, not refused, so that the error can
// name its whole key ("limits.phone[0].window"), which the TOML decoder
// cannot: see badDuration.
type Duration struct {
	time.Duration
	bad string
}

func (d *Duration) UnmarshalText(b []byte) error {
	s := string(b)
	d.bad = ""
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 {
			d.bad = s
			return nil
		}
		d.Duration = time.Duration(n) * 24 * time.Hour
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		d.bad = s
		return nil
	}
	d.Duration = v
	return nil
}

var durationType = reflect.TypeFor[Duration]()

// badDuration finds a value that is not a duration anywhere in v and names
// its key, e.g. `limits.phone[0].window: not a duration like "10m", ...`.
func badDuration(v reflect.Value, key string) error {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == durationType {
			if bad := v.Interface().(Duration).bad; bad != "" {
				return fmt.Errorf("%s: not a duration like \"90s\", \"10m\", \"1h\" or \"90d\": %q", key, bad)
			}
			return nil
		}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if !f.IsExported() || name == "" {
				continue
			}
			sub := name
			if key != "" {
				sub = key + "." + name
			}
			if err := badDuration(v.Field(i), sub); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if err := badDuration(v.Index(i), fmt.Sprintf("%s[%d]", key, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			if err := badDuration(iter.Value(), fmt.Sprintf("%s.%v", key, iter.Key())); err != nil {
				return err
			}
		}
	}
	return nil
}
