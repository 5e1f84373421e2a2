package redisstore

import (
	"context"
	"time"

	"authsvc/internal/tokens"

	"github.com/redis/go-redis/v9"
)

// touchScript records uses: for each token key that still exists, sets its
// last use to ARGV[i] if that is later than the one stored. It never
// creates a key, so a touch cannot bring a revoked token back.
//
// KEYS token keys. ARGV their uses, Unix ms.
var touchScript = redis.NewScript(`
for i, key in ipairs(KEYS) do
  local cur = redis.pcall('HGET', key, 'l')
  if type(cur) == 'string' and tonumber(cur) < tonumber(ARGV[i]) then
    redis.pcall('HSET', key, 'l', ARGV[i])
  end
end
return 0
`)

// Touch records a use of d at now for touchLoop; it never blocks on Redis.
func (s *core) Touch(_ context.Context, d tokens.Digest, now time.Time) {
	s.cache.touch(d, now.UnixMilli())
	s.touchLater(s.keys.token(d), now.UnixMilli())
	select {
	case s.touchWake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// touchLater records a use of key at ms unless a later one is pending.
func (s *core) touchLater(key string, ms int64) {
	s.touchMu.Lock()
	if ms > s.pending[key] {
		s.pending[key] = ms
	}
	s.touchMu.Unlock()
}

// touchLoop writes the pending uses, a batch at a time, until the
// store is closed. The uses of a batch that fails stay pending and are
// written again touchRetry later: the script never moves a use back, so
// writing one twice does no harm.
func (s *core) touchLoop() {
	defer s.loops.Done()
	var keys []string
	var args []any
	for {
		select {
		case <-s.stop:
			return
		case <-s.touchWake:
		}
		s.touchMu.Lock()
		batch := s.pending
		s.pending = make(map[string]int64, len(batch))
		s.touchMu.Unlock()
		failed := false
		for len(batch) > 0 && !failed {
			keys, args = keys[:0], args[:0]
			for key, ms := range batch {
				keys, args = append(keys, key), append(args, ms)
				delete(batch, key)
				if len(keys) == maxTouchBatch {
					break
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), redisCallTimeout)
			err := s.batches.sendTouches(ctx, keys, args)
			cancel()
			if err != nil {
				failed = true
				for i, key := range keys {
					s.touchLater(key, args[i].(int64))
				}
				for key, ms := range batch {
					s.touchLater(key, ms)
				}
			}
		}
		if failed {
			select {
			case <-s.stop:
				return
			case <-time.After(touchRetry):
			}
			select {
			case s.touchWake <- struct{}{}:
			default:
			}
		}
	}
}
