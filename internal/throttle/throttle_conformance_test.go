package throttle_test

import (
	"testing"

	"authsvc/internal/throttle"
	"authsvc/internal/throttle/throttletest"
)

func TestMemoryThrottleConformance(t *testing.T) {
	throttletest.Run(t, func(t *testing.T, cfg throttle.Config) throttle.Throttle {
		return throttle.NewMemory(cfg)
	})
}
