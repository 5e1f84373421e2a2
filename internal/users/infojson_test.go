package users

import (
	"encoding/json"
	"strconv"
	"testing"
)

// marshalInfo is the info reply as encoding/json makes it: what
// appendInfoJSON must match byte for byte.
func marshalInfo(t testing.TB, info Info) string {
	data, err := json.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	return string(data) + "\n"
}

func TestAppendInfoJSON(t *testing.T) {
	for _, info := range []Info{
		{Username: "alice", Name: "Alice", Email: "alice@example.com", Groups: []string{"dev", "ops"}, Admin: true},
		{Username: "bob", Groups: []string{}},
		{Username: "nil-groups"},
		{Username: "html", Name: "<script>&</script>", Email: `"quoted" \back\slash`, Groups: []string{"a>b"}},
		{Username: "controls", Name: "\x00\x01\b\f\n\r\t\x1f\x7f", Email: "tab\there"},
		{Username: "unicode", Name: "Zoë \u2028 \u2029 \u00e9\U0001F600", Groups: []string{"ｚｏｅ"}},
		{Username: "invalid", Name: "bad \xff utf-8 \xe2\x80", Email: "\xed\xa0\x80"},
	} {
		u := accountOf(info)
		if got, want := string(u.appendInfoJSON(nil)), marshalInfo(t, info); got != want {
			t.Errorf("appendInfoJSON(%+v) = %q; want %q", info, got, want)
		}
		body, length := u.InfoReply(nil)
		if want := marshalInfo(t, info); string(body) != want || len(length) != 1 || length[0] != strconv.Itoa(len(want)) {
			t.Errorf("InfoReply(%+v) = %q, %q; want %q, %d", info, body, length, want, len(want))
		}
	}
}

// TestAppendInfoJSONAllocs: encoding into a buffer with room allocates nothing.
func TestAppendInfoJSONAllocs(t *testing.T) {
	u := accountOf(Info{Username: "alice", Name: "Alice <A&B>", Email: "alice@example.com", Groups: []string{"dev", "ops"}})
	buf := make([]byte, 0, 512)
	if n := testing.AllocsPerRun(100, func() { buf = u.appendInfoJSON(buf[:0]) }); n != 0 {
		t.Errorf("appendInfoJSON allocations = %v; want 0", n)
	}
}

func FuzzAppendInfoJSON(f *testing.F) {
	f.Add("alice", "Alice <A&B>", "a@example.com", "dev", true)
	f.Add("", "\u2028\xff\x00", "\"\\", "", false)
	f.Fuzz(func(t *testing.T, username, name, email, group string, admin bool) {
		for _, groups := range [][]string{nil, {}, {group}, {group, name}} {
			info := Info{Username: username, Name: name, Email: email, Groups: groups, Admin: admin}
			u := accountOf(info)
			if got, want := string(u.appendInfoJSON(nil)), marshalInfo(t, info); got != want {
				t.Fatalf("appendInfoJSON(%+v) = %q; want %q", info, got, want)
			}
		}
	})
}

// accountOf returns an Account whose info reply is info's.
func accountOf(info Info) *Account {
	return &Account{username: info.Username, name: info.Name, email: info.Email, groups: info.Groups, flags: makeFlags(info.Admin, false, false)}
}
