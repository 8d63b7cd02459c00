package otp

import "net/http"

// Endpoint is an HTTP route an adapter brings with it: a provider's delivery
// receipts, the fake provider's outbox. The composition root hands them to
// the API, which mounts them beside its own routes. Handle writes its success
// answer itself; an error it returns is answered like every other error (its
// *Error code decides the status), so every route speaks one envelope.
type Endpoint struct {
	Method string
	Path   string
	Handle func(w http.ResponseWriter, r *http.Request) error
	// Admin routes need the admin token, as the admin API does.
	Admin bool
}
