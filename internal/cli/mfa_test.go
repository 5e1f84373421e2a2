package cli

import (
	"testing"
	"time"

	"authsvc/internal/mfa/mfatest"
)

// totpCode is oathtool's code of the base32 secret at time at: the codes
// in these tests come from an implementation that shares no code with the
// server's pquerna/otp.
func totpCode(t testing.TB, secret32 string, at time.Time) string {
	t.Helper()
	return mfatest.Code32(t, secret32, at)
}
