// Package otptest holds fakes of every port of package otp, so its send and
// verify flows are tested with no Redis, Postgres or provider (make
// test-unit). Stores are small and in memory; every fake has func fields
// that, when set, replace a method's behaviour (to fail it, or to watch it),
// as in WTF Dial's mock package. Windows never slide and codes never
// expire: a test is shorter than any window.
package otptest
