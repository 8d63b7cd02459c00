// Package smsgw holds what belongs to the repository as a whole: the default
// configuration, embedded so the binary and config.toml can never disagree.
package smsgw

import _ "embed"

// DefaultConfig is config.toml: every configuration key with its default.
//
//go:embed config.toml
var DefaultConfig string
