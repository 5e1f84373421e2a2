package resetmail_test

import (
	"context"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"authsvc/internal/resetmail"
	"authsvc/internal/servertest"
	"authsvc/internal/users"
	"authsvc/internal/users/usersfile"
)

// outbox is what a Service handed the mail queue.
type outbox struct {
	mu   sync.Mutex
	sent []resetmail.Message // guarded by mu
	full bool                // the queue refuses
}

func (o *outbox) send(m resetmail.Message) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.full {
		return false
	}
	o.sent = append(o.sent, m)
	return true
}

func (o *outbox) messages() []resetmail.Message {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]resetmail.Message(nil), o.sent...)
}

// newService returns a Service on a users file of the test users, alice
// and bob sharing an address in two cases, carol disabled with one, dave
// without one; and its outbox and log.
func newService(t *testing.T) (*resetmail.Service, *outbox, users.Directory, *servertest.SyncBuffer) {
	t.Helper()
	list := servertest.TestUsers(t)
	list[1].Email = "ALICE@example.com"                                                                       // bob shares alice's address
	list[2].Email = "carol@example.com"                                                                       // carol is disabled
	list = append(list, users.User{Username: "dave", PasswordHash: list[0].PasswordHash, Groups: []string{}}) // no address
	path := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(path, list); err != nil {
		t.Fatal(err)
	}
	dir, err := usersfile.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var logged servertest.SyncBuffer
	out := &outbox{}
	s := resetmail.New(dir, resetmail.Config{
		URL: "https://app.example.com/reset/{uid}/{token}", TTL: time.Hour,
		Render: func(d resetmail.Data) (string, string, error) {
			return "Reset for " + d.Username, "Hello " + d.Name + ", " + d.URL + " until " + d.Expires.Format(time.RFC3339), nil
		},
		Send: out.send,
	}, slog.New(slog.NewTextHandler(&logged, nil)))
	t.Cleanup(func() { s.Close() })
	return s, out, dir, &logged
}

// served waits until s has served n requests that found someone.
func served(t *testing.T, s *resetmail.Service, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for c := s.Counts(); c.Queued+c.Limited+c.Failed < int64(n) && time.Now().Before(deadline); c = s.Counts() {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // requests that find no one count nothing
}

// TestRequestFindsUsers: an address finds every enabled user with it,
// ignoring case; a name finds its user if enabled and with an address;
// nobody else is mailed; each message's link works once.
func TestRequestFindsUsers(t *testing.T) {
	s, out, dir, logged := newService(t)
	s.RequestReset("email", "alice@EXAMPLE.com", "r1")
	s.RequestReset("email", "carol@example.com", "r2") // disabled
	s.RequestReset("username", "dave", "r3")           // no address
	s.RequestReset("username", "nobody", "r4")
	s.RequestReset("email", "nobody@example.com", "r5")
	served(t, s, 2)
	got := out.messages()
	if len(got) != 2 {
		t.Fatalf("messages = %+v; want one to alice and one to bob", got)
	}
	for _, m := range got {
		if m.To != "alice@example.com" && m.To != "ALICE@example.com" {
			t.Errorf("a message to %q; want alice's or bob's address", m.To)
		}
		u, err := url.Parse(strings.Fields(m.Body)[2])
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(u.Path, "/") // /reset/{uid}/{token}
		name, err := users.ParseResetUID(parts[2])
		if err != nil || !strings.HasSuffix(m.Subject, name) {
			t.Fatalf("link %s: uid %q names %q, %v; want the subject's user", u, parts[2], name, err)
		}
		if err := users.ConfirmReset(context.Background(), dir, name, parts[3], servertest.TestUsers(t)[0].PasswordHash, time.Now()); err != nil {
			t.Errorf("the mailed link of %s: ConfirmReset = %v; want nil", name, err)
		}
	}
	if text := logged.String(); strings.Contains(text, "example.com") {
		t.Errorf("the log names an address:\n%s", text)
	}
}

// TestRequestLimits: three mails an hour per user, whatever the
// requests; a full queue or backlog is counted, never blocks.
func TestRequestLimits(t *testing.T) {
	s, out, _, _ := newService(t)
	for range 5 {
		s.RequestReset("username", "alice", "r")
	}
	served(t, s, 5)
	if got, c := len(out.messages()), s.Counts(); got != 3 || c.Limited != 2 {
		t.Errorf("5 requests for alice mailed %d and limited %d; want 3 and 2", got, c.Limited)
	}
	out.mu.Lock()
	out.full = true
	out.mu.Unlock()
	s.RequestReset("username", "bob", "r")
	served(t, s, 6)
	if c := s.Counts(); c.Failed != 1 {
		t.Errorf("a message the queue refused: Failed = %d; want 1", c.Failed)
	}
}
