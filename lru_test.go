package main

import (
	"fmt"
	"testing"
)

func TestLRUEvictsLeastRecentlyPut(t *testing.T) {
	l := newLRU[string, int](3)
	l.put("a", 1)
	l.put("b", 2)
	l.put("c", 3)
	l.put("a", 10) // a is now the most recent; b the least
	l.put("d", 4)  // evicts b

	for _, tt := range []struct {
		key    string
		val    int
		wantOK bool
	}{
		{"a", 10, true},
		{"b", 0, false},
		{"c", 3, true},
		{"d", 4, true},
	} {
		if v, ok := l.get(tt.key); v != tt.val || ok != tt.wantOK {
			t.Errorf("get(%q) = %d, %v; want %d, %v", tt.key, v, ok, tt.val, tt.wantOK)
		}
	}
	if k, v, ok := l.oldest(); k != "c" || v != 3 || !ok {
		t.Errorf("oldest() = %q, %d, %v; want \"c\", 3, true", k, v, ok)
	}
	if n := l.len(); n != 3 {
		t.Errorf("len() = %d; want 3", n)
	}
}

func TestLRUGetDoesNotTouch(t *testing.T) {
	l := newLRU[string, int](2)
	l.put("a", 1)
	l.put("b", 2)
	l.get("a")
	l.put("c", 3) // still evicts a: get is not a use
	if _, ok := l.get("a"); ok {
		t.Errorf("get(\"a\") after eviction: ok = true; want false")
	}
}

func TestLRURemove(t *testing.T) {
	l := newLRU[int, int](4)
	for i := range 4 {
		l.put(i, i)
	}
	l.remove(0)
	l.remove(2)
	l.remove(99) // absent: no-op
	if n := l.len(); n != 2 {
		t.Fatalf("len() = %d; want 2", n)
	}
	if k, _, _ := l.oldest(); k != 1 {
		t.Errorf("oldest() = %d; want 1", k)
	}
	l.remove(1)
	l.remove(3)
	if _, _, ok := l.oldest(); ok {
		t.Errorf("oldest() on empty lru: ok = true; want false")
	}
}

func TestLRUBounded(t *testing.T) {
	const max = 16
	l := newLRU[string, int](max)
	for i := range 10 * max {
		l.put(fmt.Sprint("k", i), i)
		if n := l.len(); n > max {
			t.Fatalf("after %d puts len() = %d; want <= %d", i+1, n, max)
		}
	}
	// The survivors are exactly the last max keys put.
	for i := 9 * max; i < 10*max; i++ {
		if v, ok := l.get(fmt.Sprint("k", i)); !ok || v != i {
			t.Errorf("get(k%d) = %d, %v; want %d, true", i, v, ok, i)
		}
	}
}
