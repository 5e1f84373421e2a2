package userstest

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"authsvc/internal/users"
)

// pageNames are the usernames of the page directory (pageDirectory) in
// byte order: upper case before lower, non-ASCII after both.
var pageNames = []string{"Zed", "alice", "alicia", "bob", "carol", "dave", "zed", "Ärger", "ärger"}

// runPage checks Directory.Page and Directory.Count against one backing:
// the admin API's list of users and its filters.
func runPage(t *testing.T, fx fixture) {
	for _, tt := range []struct {
		name string
		run  func(t *testing.T, fx fixture)
	}{
		{"empty", testPageEmpty},
		{"byte order, after exclusive, limit", testPageOrder},
		{"filters", testPageFilters},
		{"users carry their fields", testPageFields},
		{"writes are seen at once", testPageWrites},
	} {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, fx) })
	}
}

// pageDirectory opens a handle on a fresh backing holding the users of
// pageNames, each with what a filter asks of it:
//
//	name    groups      admin disabled second factor
//	Zed     ops         yes
//	alice   dev                        an authenticator (and a token)
//	alicia  dev ops           yes
//	bob     -                          a pending authenticator only: none
//	carol   sales       yes            recovery codes only
//	dave    ops         yes   yes
//	zed     dev
//	Ärger   sales dev                  an authenticator and a pending one
//	ärger   dev
func (fx fixture) pageDirectory(t *testing.T) users.Directory {
	t.Helper()
	ctx := context.Background()
	totp := func() *users.TOTPFactor {
		return &users.TOTPFactor{SealedSecret: []byte("sealed\x00secret"), Step: 30, Digits: 6}
	}
	recovery := []string{strings.Repeat("0a", 32)}
	list := []users.User{
		{Username: "Zed", Groups: []string{"ops"}, Admin: true},
		{Username: "alice", Name: "Alice", Email: "alice@example.com", Groups: []string{"dev"}, MFA: &users.Factors{TOTP: totp()}},
		{Username: "alicia", Email: "Alice@Example.COM", Groups: []string{"dev", "ops"}, Disabled: true},
		{Username: "bob", Groups: []string{}, MFA: &users.Factors{PendingTOTP: totp()}},
		{Username: "carol", Groups: []string{"sales"}, Admin: true, MFA: &users.Factors{RecoveryCodes: recovery, RecoveryKeyID: "0123abcd"}},
		{Username: "dave", Groups: []string{"ops"}, Admin: true, Disabled: true},
		{Username: "zed", Email: "ZED@example.org", Groups: []string{"dev"}},
		{Username: "Ärger", Name: "Ärger", Email: "Ä@example.com", Groups: []string{"sales", "dev"}, MFA: &users.Factors{TOTP: totp(), PendingTOTP: totp()}},
		{Username: "ärger", Email: "ä@example.com", Groups: []string{"dev"}},
	}
	d := fx.factory(t)()
	// Added out of order: the order of Page is its own, not the backing's.
	for _, i := range []int{4, 8, 0, 6, 2, 7, 1, 5, 3} {
		u := list[i]
		u.PasswordHash = fx.hash
		if err := d.Add(ctx, u); err != nil {
			t.Fatalf("Add(%s) = %v", u.Username, err)
		}
	}
	create(t, d, "alice", liveToken("ci"))
	return d
}

// page returns the usernames d.Page returns, failing t on an error.
func page(t *testing.T, d users.Directory, after string, limit int, f users.Filter) []string {
	t.Helper()
	list, err := d.Page(context.Background(), after, limit, f)
	if err != nil {
		t.Fatalf("Page(%q, %d, %+v) = %v", after, limit, f, err)
	}
	return usernames(list)
}

// usernames returns the usernames of list, in its order.
func usernames(list []users.User) []string {
	names := make([]string, 0, len(list))
	for _, u := range list {
		names = append(names, u.Username)
	}
	return names
}

// walk pages through d in pages of limit users f matches, and returns
// every username in the order the pages gave them.
func walk(t *testing.T, d users.Directory, limit int, f users.Filter) []string {
	t.Helper()
	var all []string
	after := ""
	for range 100 {
		names := page(t, d, after, limit, f)
		if len(names) > limit {
			t.Fatalf("Page(%q, %d, %+v) = %q: more than the limit", after, limit, f, names)
		}
		all = append(all, names...)
		if len(names) < limit {
			return all
		}
		after = names[len(names)-1]
	}
	t.Fatalf("paging with limit %d, %+v: no end after 100 pages", limit, f)
	return nil
}

// reference returns, of d's users as List gives them, what users.Page
// returns for after, limit and f: the reference a backend's Page agrees with.
func reference(t *testing.T, d users.Directory, after string, limit int, f users.Filter) []string {
	t.Helper()
	list, err := d.List(context.Background())
	if err != nil {
		t.Fatalf("List() = %v", err)
	}
	return usernames(users.Page(list, after, limit, f))
}

// testPageEmpty: an empty directory has no page and counts no one.
func testPageEmpty(t *testing.T, fx fixture) {
	d := fx.factory(t)()
	if names := page(t, d, "", users.MaxPage, users.Filter{}); len(names) != 0 {
		t.Errorf("Page(\"\", %d, {}) of an empty directory = %q; want none", users.MaxPage, names)
	}
	if n, err := d.Count(context.Background(), users.Filter{}); n != 0 || err != nil {
		t.Errorf("Count({}) of an empty directory = %d, %v; want 0, nil", n, err)
	}
}

// testPageOrder: pages come in byte order of usernames, start after
// after (a username or not), hold at most limit users, and paging through
// gives every user once.
func testPageOrder(t *testing.T, fx fixture) {
	d := fx.pageDirectory(t)
	all := users.Filter{}
	if got := page(t, d, "", users.MaxPage, all); !slices.Equal(got, pageNames) {
		t.Errorf("Page(\"\", %d, {}) = %q; want %q", users.MaxPage, got, pageNames)
	}
	for _, tt := range []struct {
		after string
		limit int
		want  []string
	}{
		{"", 1, []string{"Zed"}},
		{"Zed", 2, []string{"alice", "alicia"}},
		{"alice", 1, []string{"alicia"}},                   // after itself is left out
		{"alib", 2, []string{"alice", "alicia"}},           // not a username: from the next one
		{"alicia0", 1, []string{"bob"}},                    // between two
		{"Z", 1, []string{"Zed"}},                          // before the first
		{"zed", users.MaxPage, []string{"Ärger", "ärger"}}, // byte order: Ä (C3 84) before ä (C3 A4)
		{"Ärger", users.MaxPage, []string{"ärger"}},
		{"ärger", users.MaxPage, nil},
		{"\xff", users.MaxPage, nil},
		{"dave", 3, []string{"zed", "Ärger", "ärger"}},
	} {
		got := page(t, d, tt.after, tt.limit, all)
		if !slices.Equal(got, tt.want) {
			t.Errorf("Page(%q, %d, {}) = %q; want %q", tt.after, tt.limit, got, tt.want)
		}
		if ref := reference(t, d, tt.after, tt.limit, all); !slices.Equal(got, ref) {
			t.Errorf("Page(%q, %d, {}) = %q; users.Page over List gives %q", tt.after, tt.limit, got, ref)
		}
	}
	for _, limit := range []int{1, 2, 4, len(pageNames)} {
		if got := walk(t, d, limit, all); !slices.Equal(got, pageNames) {
			t.Errorf("paging through with limit %d = %q; want %q", limit, got, pageNames)
		}
	}
	if n, err := d.Count(context.Background(), all); n != len(pageNames) || err != nil {
		t.Errorf("Count({}) = %d, %v; want %d, nil", n, err, len(pageNames))
	}
}

// testPageFilters: each filter field alone and with others selects the
// users Filter.Match does, in Page (whole and paged through two by two)
// and Count.
func testPageFilters(t *testing.T, fx fixture) {
	d := fx.pageDirectory(t)
	ctx := context.Background()
	for _, tt := range []struct {
		f    users.Filter
		want []string
	}{
		{users.Filter{Prefix: "al"}, []string{"alice", "alicia"}},
		{users.Filter{Prefix: "Z"}, []string{"Zed"}}, // byte for byte: not zed
		{users.Filter{Prefix: "ä"}, []string{"ärger"}},
		{users.Filter{Prefix: "alice"}, []string{"alice"}},
		{users.Filter{Prefix: "x"}, nil},
		{users.Filter{Groups: []string{"dev"}}, []string{"alice", "alicia", "zed", "Ärger", "ärger"}},
		{users.Filter{Groups: []string{"ops", "sales"}}, []string{"Zed", "alicia", "carol", "dave", "Ärger"}},
		{users.Filter{Groups: []string{"nosuch"}}, nil},
		{users.Filter{Admin: users.Yes}, []string{"Zed", "carol", "dave"}},
		{users.Filter{Admin: users.No}, []string{"alice", "alicia", "bob", "zed", "Ärger", "ärger"}},
		{users.Filter{Disabled: users.Yes}, []string{"alicia", "dave"}},
		{users.Filter{Disabled: users.No}, []string{"Zed", "alice", "bob", "carol", "zed", "Ärger", "ärger"}},
		{users.Filter{MFA: users.Yes}, []string{"alice", "carol", "Ärger"}},
		{users.Filter{MFA: users.No}, []string{"Zed", "alicia", "bob", "dave", "zed", "ärger"}},
		{users.Filter{Groups: []string{"dev"}, Disabled: users.No, MFA: users.No}, []string{"zed", "ärger"}},
		{users.Filter{Prefix: "a", Groups: []string{"ops"}, Disabled: users.Yes}, []string{"alicia"}},
		{users.Filter{Admin: users.Yes, Disabled: users.No, MFA: users.No}, []string{"Zed"}},
		{users.Filter{Admin: users.Yes, MFA: users.Yes}, []string{"carol"}},
		{users.Filter{Admin: users.No, Groups: []string{"sales"}}, []string{"Ärger"}},
		{users.Filter{Prefix: "d", Admin: users.Yes, Disabled: users.Yes, MFA: users.No, Groups: []string{"ops"}}, []string{"dave"}},
		{users.Filter{Prefix: "d", Disabled: users.No}, nil},
		// Email: ASCII letters in either case, other bytes as they are.
		{users.Filter{Email: "alice@example.com"}, []string{"alice", "alicia"}},
		{users.Filter{Email: "ALICE@EXAMPLE.COM", Disabled: users.No}, []string{"alice"}},
		{users.Filter{Email: "zed@Example.org"}, []string{"zed"}},
		{users.Filter{Email: "ä@example.com"}, []string{"ärger"}},
		{users.Filter{Email: "Ä@EXAMPLE.COM"}, []string{"Ärger"}},
		{users.Filter{Email: "alice@example.co"}, nil},
		{users.Filter{Email: "nobody@example.com"}, nil},
		{users.Filter{Email: "alice@example.com", Prefix: "alici"}, []string{"alicia"}},
	} {
		got := page(t, d, "", users.MaxPage, tt.f)
		if !slices.Equal(got, tt.want) {
			t.Errorf("Page(\"\", %d, %+v) = %q; want %q", users.MaxPage, tt.f, got, tt.want)
		}
		if ref := reference(t, d, "", users.MaxPage, tt.f); !slices.Equal(got, ref) {
			t.Errorf("Page(\"\", %d, %+v) = %q; users.Page over List gives %q", users.MaxPage, tt.f, got, ref)
		}
		if paged := walk(t, d, 2, tt.f); !slices.Equal(paged, tt.want) {
			t.Errorf("paging through %+v two by two = %q; want %q", tt.f, paged, tt.want)
		}
		if n, err := d.Count(ctx, tt.f); n != len(tt.want) || err != nil {
			t.Errorf("Count(%+v) = %d, %v; want %d, nil", tt.f, n, err, len(tt.want))
		}
	}
}

// testPageFields: the users of a page carry the fields List gives them:
// profile, groups, flags, second factors and personal access tokens.
func testPageFields(t *testing.T, fx fixture) {
	d := fx.pageDirectory(t)
	list, err := d.List(context.Background())
	if err != nil {
		t.Fatalf("List() = %v", err)
	}
	got, err := d.Page(context.Background(), "", users.MaxPage, users.Filter{})
	if err != nil || len(got) != len(pageNames) {
		t.Fatalf("Page(\"\", %d, {}) = %d users, %v; want %d", users.MaxPage, len(got), err, len(pageNames))
	}
	for i := range got {
		g := &got[i]
		k := slices.IndexFunc(list, func(u users.User) bool { return u.Username == g.Username })
		if k < 0 {
			t.Errorf("Page gave %q, which List does not", g.Username)
			continue
		}
		w := &list[k]
		if g.Name != w.Name || g.Email != w.Email || g.Admin != w.Admin || g.Disabled != w.Disabled {
			t.Errorf("Page's %s = name %q, email %q, admin %v, disabled %v; List's: %q, %q, %v, %v",
				g.Username, g.Name, g.Email, g.Admin, g.Disabled, w.Name, w.Email, w.Admin, w.Disabled)
		}
		if !slices.Equal(g.Groups, w.Groups) || (g.Groups == nil) != (w.Groups == nil) {
			t.Errorf("Page's %s: groups %#v; List's %#v", g.Username, g.Groups, w.Groups)
		}
		if !reflect.DeepEqual(g.MFA, w.MFA) || g.HasSecondFactor() != w.HasSecondFactor() {
			t.Errorf("Page's %s: mfa %s; List's %s", g.Username, jsonOf(g.MFA), jsonOf(w.MFA))
		}
		if !sameTokens(g.AccessTokens, w.AccessTokens...) {
			t.Errorf("Page's %s: access tokens %s; List's %s", g.Username, jsonOf(g.AccessTokens), jsonOf(w.AccessTokens))
		}
	}
	if i := slices.IndexFunc(got, func(u users.User) bool { return u.Username == "alice" }); i < 0 || len(got[i].AccessTokens) != 1 {
		t.Errorf("Page's alice has no access token; want the one made")
	}
	// The caller's own copy: changing it changes no later page.
	for i := range got {
		if got[i].MFA != nil && got[i].MFA.TOTP != nil {
			got[i].MFA.TOTP.Digits = 9
		}
		for k := range got[i].Groups {
			got[i].Groups[k] = "changed"
		}
	}
	if again := page(t, d, "", users.MaxPage, users.Filter{Groups: []string{"changed"}}); len(again) != 0 {
		t.Errorf("after changing a page's groups, Page(groups changed) = %q; want none", again)
	}
	again, _ := d.Page(context.Background(), "", 2, users.Filter{Prefix: "alice"})
	if len(again) != 1 || again[0].MFA == nil || again[0].MFA.TOTP == nil || again[0].MFA.TOTP.Digits != 6 {
		t.Errorf("after changing a page's factors, alice's = %s; want 6 digits as stored", jsonOf(again))
	}
}

// testPageWrites: a user added or deleted, changed, through the directory
// is seen by the next Page and Count, as by Lookup.
func testPageWrites(t *testing.T, fx fixture) {
	d := fx.pageDirectory(t)
	ctx := context.Background()
	admins := users.Filter{Admin: users.Yes, Disabled: users.No}
	for range 2 { // asked again: an answer kept must not outlive a write
		if n, err := d.Count(ctx, admins); n != 2 || err != nil { // Zed, carol
			t.Errorf("Count(%+v) = %d, %v; want 2, nil", admins, n, err)
		}
	}
	if err := users.Update(ctx, d, "zed", func(u *users.User) error { u.Admin = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if n, err := d.Count(ctx, admins); n != 3 || err != nil {
		t.Errorf("after making zed an admin, Count(%+v) = %d, %v; want 3, nil", admins, n, err)
	}
	if err := users.Update(ctx, d, "zed", func(u *users.User) error { u.Admin = false; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := d.Add(ctx, users.User{Username: "bobby", PasswordHash: fx.hash, Groups: []string{"dev"}}); err != nil {
		t.Fatal(err)
	}
	if got, want := page(t, d, "bob", 2, users.Filter{}), []string{"bobby", "carol"}; !slices.Equal(got, want) {
		t.Errorf("after Add(bobby), Page(bob, 2, {}) = %q; want %q", got, want)
	}
	if err := d.Delete(ctx, "alicia"); err != nil {
		t.Fatal(err)
	}
	if got, want := page(t, d, "Zed", 2, users.Filter{}), []string{"alice", "bob"}; !slices.Equal(got, want) {
		t.Errorf("after Delete(alicia), Page(Zed, 2, {}) = %q; want %q", got, want)
	}
	if err := users.Update(ctx, d, "zed", func(u *users.User) error { u.Disabled = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if got, want := page(t, d, "", users.MaxPage, users.Filter{Disabled: users.Yes}), []string{"dave", "zed"}; !slices.Equal(got, want) {
		t.Errorf("after disabling zed, Page(\"\", %d, disabled) = %q; want %q", users.MaxPage, got, want)
	}
	f := users.Filter{Groups: []string{"dev"}}
	if n, err := d.Count(ctx, f); n != 5 || err != nil { // alice, bobby, zed, Ärger, ärger
		t.Errorf("after the writes, Count(%+v) = %d, %v; want 5, nil", f, n, err)
	}
	if n, err := d.Count(ctx, users.Filter{}); n != len(pageNames) || err != nil {
		t.Errorf("after the writes, Count({}) = %d, %v; want %d, nil", n, err, len(pageNames))
	}
}
