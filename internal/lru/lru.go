package lru

import "iter"

// An Cache is a map that holds at most cap keys: adding a key to a full lru
// evicts the least recently put key. All operations are O(1).
// It is not safe for concurrent use; its owner's mutex guards it.
type Cache[K comparable, V any] struct {
	cap  int
	m    map[K]*lruEntry[K, V]
	root lruEntry[K, V] // ring sentinel: root.next is the most recently put entry, root.prev the least
}

type lruEntry[K comparable, V any] struct {
	key        K
	val        V
	prev, next *lruEntry[K, V]
}

// New returns an empty lru that holds at most capacity keys (at least one).
func New[K comparable, V any](capacity int) *Cache[K, V] {
	l := &Cache[K, V]{cap: max(1, capacity), m: make(map[K]*lruEntry[K, V])}
	l.root.prev, l.root.next = &l.root, &l.root
	return l
}

// Get returns k's value and reports whether k is present. It does not
// change k's recency: only put does.
func (l *Cache[K, V]) Get(k K) (V, bool) {
	if e, ok := l.m[k]; ok {
		return e.val, true
	}
	var zero V
	return zero, false
}

// Put sets k's value and makes k the most recently put key. If k is new
// and l is full, the least recently put key is evicted first.
func (l *Cache[K, V]) Put(k K, v V) {
	e, ok := l.m[k]
	if ok {
		l.unlink(e)
	} else {
		if len(l.m) >= l.cap {
			l.Remove(l.root.prev.key)
		}
		e = &lruEntry[K, V]{key: k}
		l.m[k] = e
	}
	e.val = v
	// Link e right after root: the most recent end.
	e.prev, e.next = &l.root, l.root.next
	e.prev.next, e.next.prev = e, e
}

// Remove deletes k, if present.
func (l *Cache[K, V]) Remove(k K) {
	if e, ok := l.m[k]; ok {
		l.unlink(e)
		delete(l.m, k)
	}
}

// Oldest returns the least recently put key and its value, and reports
// whether l holds any key.
func (l *Cache[K, V]) Oldest() (K, V, bool) {
	if len(l.m) == 0 {
		var k K
		var v V
		return k, v, false
	}
	e := l.root.prev
	return e.key, e.val, true
}

// Len returns the number of keys held.
func (l *Cache[K, V]) Len() int { return len(l.m) }

// All yields every entry in no particular order; the loop may remove the
// entry it was given.
func (l *Cache[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for k, e := range l.m {
			if !yield(k, e.val) {
				return
			}
		}
	}
}

// Cap returns how many entries l holds at most.
func (l *Cache[K, V]) Cap() int { return l.cap }

func (l *Cache[K, V]) unlink(e *lruEntry[K, V]) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil // no dangling references to keep evicted entries alive
}
