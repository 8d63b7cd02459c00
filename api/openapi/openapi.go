// Package openapi holds smsgw's OpenAPI 3.1 document, the machine-readable
// form of the HTTP contract. The service serves it at GET /openapi.json and
// the tests validate every response they receive against it.
package openapi

import _ "embed"

// JSON is the document, as kept in openapi.json next to this file.
//
//go:embed openapi.json
var JSON []byte
