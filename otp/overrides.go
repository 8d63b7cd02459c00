package otp

// blocked is the client error for a number an operator blocked: refused
// like a number the policy refuses.
func blocked(o Override) *Error {
	return &Error{Code: EPhoneNotAllowed, Message: "this number cannot receive codes here",
		Fields: map[string]any{"reason": "override:block"}}
}
