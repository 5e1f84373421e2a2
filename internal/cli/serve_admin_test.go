package cli

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"authsvc/internal/servertest"
	"authsvc/internal/users/usersfile"
)

// TestServeAdminResetLinkSettings: the admin API's reset-link follows
// serve's --reset-url and --reset-ttl, as user reset-link follows its own,
// and the link it gives sets the password once.
func TestServeAdminResetLinkSettings(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(path, servertest.TestUsers(t)); err != nil { // bob is an admin
		t.Fatal(err)
	}
	base, _, _ := startServer(t, map[string]string{"AUTHSVC_USERS": path}, "--cost", "4",
		"--reset-url", "https://app.example.com/reset/{uid}/{token}", "--reset-ttl", "10m")
	bob := servertest.LoginToken(t, base, "bob", "bob-pw")
	req, _ := http.NewRequest("POST", base+"/api/admin/users/alice/reset-link", nil)
	req.Header.Set("authorization", "Token "+bob)
	before := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var reply struct {
		URL       string    `json:"url"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if err := json.Unmarshal(body, &reply); resp.StatusCode != 200 || err != nil {
		t.Fatalf("POST reset-link of alice as bob = %d %s; want 200 with a link", resp.StatusCode, body)
	}
	prefix := "https://app.example.com/reset/" + base64.RawURLEncoding.EncodeToString([]byte("alice")) + "/"
	token, ok := strings.CutPrefix(reply.URL, prefix)
	if !ok || len(token) != 43 {
		t.Errorf("the admin API's link = %q; want %s and a 43-character token (--reset-url)", reply.URL, prefix)
	}
	if d := reply.ExpiresAt.Sub(before); d < 10*time.Minute-time.Second || d > 10*time.Minute+time.Minute {
		t.Errorf("the admin API's link expires %v after the request; want 10m (--reset-ttl)", d)
	}
	confirm := fmt.Sprintf(`{"uid":%q,"token":%q,"new_password":"alice's brand new passphrase"}`, base64.RawURLEncoding.EncodeToString([]byte("alice")), token)
	if resp, body := servertest.PostJSON(t, base+"/api/auth/password/reset/confirm/", confirm); resp.StatusCode != 204 {
		t.Fatalf("confirm with the admin API's link = %d %s; want 204", resp.StatusCode, body)
	}
	servertest.LoginToken(t, base, "alice", "alice's brand new passphrase")
}
