package redisstore

import (
	"context"
	"sync"

	"authsvc/internal/tokens"
)

var (
	_ tokens.UserNotifier = (*Store)(nil)
	_ tokens.UserNotifier = (*ClusterStore)(nil)
)

// User notices (tokens.UserNotifier): a change of a user's record in the
// directory (a personal access token revoked) told to every instance
// sharing the store, so that each reads the user again at once. They
// travel on the invalidation channel, as
//
//	d:{username}  that user's record changed in the directory
//
// so that they share its link, its order and its health checks
// (cache.go); the subscriber runs for them even with the cache off.
//
// The subscriber must never wait on a hook (a hook reads the directory,
// which may take a while), nor may it lose a notice silently: it queues
// them, up to maxPendingNotices, and one goroutine (noticeLoop) calls the
// hook. A notice that finds the queue full is not kept; the queue then
// calls the hook once with "" (every user) instead of the ones it holds,
// since any of them may be among those lost. So does a link made again
// after a break (noticeQueue.resume): what was published in between is
// lost.

// maxPendingNotices bounds the notices waiting for the hook.
const maxPendingNotices = 1024

// noticeQueue holds the notices heard and not yet given to the hook; its
// zero value holds no hook, and drops every notice.
type noticeQueue struct {
	mu       sync.Mutex
	hook     func(username string) // nil: no one listens
	pending  []string
	everyone bool          // a notice was dropped, or a link broke: the hook hears "" next
	wake     chan struct{} // has room for one wake-up
}

// post queues a notice for username; "" stands for every user.
func (q *noticeQueue) post(username string) {
	q.mu.Lock()
	if q.hook == nil {
		q.mu.Unlock()
		return
	}
	if username == "" || len(q.pending) >= maxPendingNotices {
		q.everyone = true
	} else {
		q.pending = append(q.pending, username)
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take returns the hook and what it is to hear: every queued notice, or
// only "" when any was dropped; it empties the queue.
func (q *noticeQueue) take() (func(string), []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	batch := q.pending
	if q.everyone {
		batch = []string{""}
	}
	q.pending, q.everyone = nil, false
	return q.hook, batch
}

// NotifyUser publishes on the invalidation channel that username's record
// changed in the directory: every store on this Redis (or Cluster) and
// prefix that registered a hook (OnUserNotice) calls it with username,
// this one included.
func (s *core) NotifyUser(ctx context.Context, username string) error {
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	if err := s.rdb.Publish(ctx, s.invChannel(), "d:"+username).Err(); err != nil {
		return unavailable("notify", err)
	}
	return nil
}

// OnUserNotice makes the store call hook with the username of each notice
// NotifyUser publishes, from any store sharing its Redis and prefix, and
// with "" when notices may have been lost (see noticeQueue). It starts the
// subscription at once, the cache on or off. A link that was never made
// before needs no "": the store's first subscription begins the stream,
// and what the caller read of the directory before it is the caller's to
// keep fresh (its own reload). A nil hook stops the calls.
func (s *core) OnUserNotice(hook func(username string)) {
	s.notices.mu.Lock()
	s.notices.hook = hook
	s.notices.mu.Unlock()
	s.noticeOnce.Do(func() {
		s.loops.Add(1)
		go s.noticeLoop()
	})
	s.startSubscriber()
}

// noticeLoop gives the queued notices to the hook until the store is
// closed.
func (s *core) noticeLoop() {
	defer s.loops.Done()
	for {
		select {
		case <-s.stop:
			return
		case <-s.notices.wake:
		}
		hook, batch := s.notices.take()
		for _, username := range batch {
			if hook != nil {
				hook(username)
			}
		}
	}
}

// resumeNotices records a confirmed subscription; it is called only by
// the subscriber. Any but the store's first attempt's first follows a
// break, a failed attempt, or a resubscription go-redis made on its own,
// across which notices may have been lost, so the hook hears "".
func (s *core) resumeNotices() {
	if s.relinking {
		s.notices.post("")
	}
	s.relinking = true
}
