package tokens

import "sync/atomic"

// A strHandle names a string in a strTable; 0 is the empty string.
type strHandle uint32

// strChunk is how many strings one chunk of a strTable holds.
const strChunk = 1024

// A strTable interns strings behind handles, counting the holders of each,
// so that the memory store's records hold no pointers and equal strings
// (a user's name, a browser's user agent) are kept once. Writes happen
// under the store's mutex; get reads without it, which is safe for a
// handle held by a record the reader has under its shard's lock: the
// string's slot is written before the record is stored and not reused
// before the record is gone.
type strTable struct {
	// chunks never move once made, so get needs no lock; the directory
	// is replaced whole when it grows.
	chunks atomic.Pointer[[]*[strChunk]string]
	ids    map[string]strHandle
	holds  []int32 // holders of each handle
	free   []strHandle
}

func (t *strTable) init() {
	t.ids = map[string]strHandle{"": 0}
	t.chunks.Store(&[]*[strChunk]string{new([strChunk]string)})
	t.holds = []int32{1} // the empty string is never released
}

// get returns the string h names.
func (t *strTable) get(h strHandle) string {
	return (*t.chunks.Load())[h/strChunk][h%strChunk]
}

// find returns the handle of s, or one that no record holds when s is not
// in the table.
func (t *strTable) find(s string) strHandle {
	if h, ok := t.ids[s]; ok {
		return h
	}
	return ^strHandle(0)
}

// add returns s's handle, adding s when new, and counts one more holder.
func (t *strTable) add(s string) strHandle {
	if s == "" {
		return 0
	}
	if h, ok := t.ids[s]; ok {
		t.holds[h]++
		return h
	}
	var h strHandle
	if n := len(t.free); n > 0 {
		h, t.free = t.free[n-1], t.free[:n-1]
	} else {
		h = strHandle(len(t.holds))
		t.holds = append(t.holds, 0)
		if chunks := *t.chunks.Load(); int(h/strChunk) == len(chunks) {
			grown := append(chunks[:len(chunks):len(chunks)], new([strChunk]string))
			t.chunks.Store(&grown)
		}
	}
	(*t.chunks.Load())[h/strChunk][h%strChunk] = s
	t.ids[s] = h
	t.holds[h] = 1
	return h
}

// release counts one holder of h fewer and forgets its string when none is left.
func (t *strTable) release(h strHandle) {
	if h == 0 {
		return
	}
	if t.holds[h]--; t.holds[h] > 0 {
		return
	}
	slot := &(*t.chunks.Load())[h/strChunk][h%strChunk]
	delete(t.ids, *slot)
	*slot = ""
	t.free = append(t.free, h)
}

// Len reports how many strings the table holds, the empty one aside.
func (t *strTable) Len() int { return len(t.ids) - 1 }
