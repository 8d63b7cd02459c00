package app

import (
	"fmt"
	"reflect"
	"strings"
)

// ownRedis lets one file serve every region: when [region.redis] lists this
// region too, that entry is this region's Redis. Each key it sets becomes
// [redis]'s; a key [redis] also sets (in the file, or from the environment,
// per setLocally) must name the same, or the two would disagree on where
// this region's state lives.
func (r *RegionConfig) ownRedis(local *RedisConfig, setLocally func(key string) bool) error {
	own, ok := r.Redis[r.Name]
	if r.Name == "" || !ok {
		return nil
	}
	ov, lv := reflect.ValueOf(own), reflect.ValueOf(local).Elem()
	for i := range ov.NumField() {
		key, _, _ := strings.Cut(ov.Type().Field(i).Tag.Get("toml"), ",")
		f := ov.Field(i)
		if key == "" || f.IsZero() {
			continue
		}
		if setLocally(key) && !reflect.DeepEqual(f.Interface(), lv.Field(i).Interface()) {
			return &keyError{"region.redis." + r.Name + "." + key, fmt.Sprintf(
				"this region's Redis differs from redis.%s; leave [redis] out or name the same", key)}
		}
		lv.Field(i).Set(f)
	}
	delete(r.Redis, r.Name)
	return nil
}
