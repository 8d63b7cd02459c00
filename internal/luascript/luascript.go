// Package luascript loads the service's Redis Lua scripts from a package's
// embedded files, each after the prelude (prelude.lua): what every script
// may use and, since scripts cannot load each other, is written once here.
package luascript

import (
	_ "embed"
	"io/fs"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed prelude.lua
var prelude string

// Source is the script named name in fsys (a package's //go:embed *.lua)
// as it runs: the prelude, then the package's own declarations (decls,
// e.g. pumping's hash fields, generated from Go so both sides share one
// declaration), then the file. It is self-contained, so a script may also
// run it inside its own (wrapped as a local function of KEYS and ARGV). A
// file that is not there panics: the package was built without it.
func Source(fsys fs.FS, name string, decls ...string) string {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		panic("luascript: " + err.Error())
	}
	return prelude + strings.Join(decls, "") + string(b)
}

// Script is Source ready to run (EVALSHA, loaded on NOSCRIPT).
func Script(fsys fs.FS, name string, decls ...string) *redis.Script {
	return redis.NewScript(Source(fsys, name, decls...))
}

// Prelude is what Source puts before every script, for a script read from
// elsewhere (a benchmark measuring another version of a file).
func Prelude() string { return prelude }
