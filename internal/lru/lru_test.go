package lru

import (
	"fmt"
	"testing"
)

func TestLRUEvictsLeastRecentlyPut(t *testing.T) {
	l := New[string, int](3)
	l.Put("a", 1)
	l.Put("b", 2)
	l.Put("c", 3)
	l.Put("a", 10) // a is now the most recent; b the least
	l.Put("d", 4)  // evicts b

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
		if v, ok := l.Get(tt.key); v != tt.val || ok != tt.wantOK {
			t.Errorf("get(%q) = %d, %v; want %d, %v", tt.key, v, ok, tt.val, tt.wantOK)
		}
	}
	if k, v, ok := l.Oldest(); k != "c" || v != 3 || !ok {
		t.Errorf("oldest() = %q, %d, %v; want \"c\", 3, true", k, v, ok)
	}
	if n := l.Len(); n != 3 {
		t.Errorf("len() = %d; want 3", n)
	}
}

func TestLRUGetDoesNotTouch(t *testing.T) {
	l := New[string, int](2)
	l.Put("a", 1)
	l.Put("b", 2)
	l.Get("a")
	l.Put("c", 3) // still evicts a: get is not a use
	if _, ok := l.Get("a"); ok {
		t.Errorf("get(\"a\") after eviction: ok = true; want false")
	}
}

func TestLRURemove(t *testing.T) {
	l := New[int, int](4)
	for i := range 4 {
		l.Put(i, i)
	}
	l.Remove(0)
	l.Remove(2)
	l.Remove(99) // absent: no-op
	if n := l.Len(); n != 2 {
		t.Fatalf("len() = %d; want 2", n)
	}
	if k, _, _ := l.Oldest(); k != 1 {
		t.Errorf("oldest() = %d; want 1", k)
	}
	l.Remove(1)
	l.Remove(3)
	if _, _, ok := l.Oldest(); ok {
		t.Errorf("oldest() on empty lru: ok = true; want false")
	}
}

func TestLRUBounded(t *testing.T) {
	const max = 16
	l := New[string, int](max)
	for i := range 10 * max {
		l.Put(fmt.Sprint("k", i), i)
		if n := l.Len(); n > max {
			t.Fatalf("after %d puts len() = %d; want <= %d", i+1, n, max)
		}
	}
	// The survivors are exactly the last max keys put.
	for i := 9 * max; i < 10*max; i++ {
		if v, ok := l.Get(fmt.Sprint("k", i)); !ok || v != i {
			t.Errorf("get(k%d) = %d, %v; want %d, true", i, v, ok, i)
		}
	}
}
