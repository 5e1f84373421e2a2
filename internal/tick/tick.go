package tick

import (
	"context"
	"time"
)

// Every calls f every interval until ctx is done: the one ticker loop
// behind the directory's watch, the store's sweep and the log's flush.
func Every(ctx context.Context, interval time.Duration, f func(now time.Time)) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			f(now)
		}
	}
}
