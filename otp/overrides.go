package otp

// noOverrides is the Overrides of a service without a pumping guard.
type noOverrides struct{}

func (noOverrides) Lookup(string) (Override, bool) { return Override{}, false }

func (s *Service) overrides() Overrides {
	if s.Overrides == nil {
		return noOverrides{}
	}
	return s.Overrides
}

// blocked is the client error for a number an operator blocked: refused
// like a number the policy refuses.
func blocked(o Override) *Error {
	return &Error{Code: EPhoneNotAllowed, Message: "this number cannot receive codes here",
		Fields: map[string]any{"reason": "override:block"}}
}
