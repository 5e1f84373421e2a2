package django

import (
	"testing"

	"authsvc/integration/harness"
)

// TestMain builds authsvc once for this package's tests and makes the test
// binary the hasher pool's worker (harness.Main).
func TestMain(m *testing.M) { harness.Main(m) }
