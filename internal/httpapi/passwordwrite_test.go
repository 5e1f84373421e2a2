package httpapi_test

import (
	"errors"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"authsvc/internal/httpapi"
)

// TestPasswordChangeNotWritten: when the new hash cannot be written (here
// the users file's lock cannot be taken), the change fails as a whole: no
// 200 and no new token, and nothing ends: the presented token and the old
// password still work.
func TestPasswordChangeNotWritten(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour})
	tok := e.login("alice")
	lock := e.usersPath + ".lock"
	if err := os.Remove(lock); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	if err := os.Mkdir(lock, 0o700); err != nil { // a lock no one can open
		t.Fatal(err)
	}
	w := e.do("POST", "/api/auth/password/", changeBody("alice-pw", newPassphrase), jsonCT, "Authorization: Token "+tok)
	if w.Code != http.StatusInternalServerError || errorCode(t, w) != "internal_error" {
		t.Errorf("password change with the users file unwritable = %d %s; want 500 internal_error", w.Code, strings.TrimSpace(w.Body.String()))
	}
	if n, _ := e.store.Len(); n != 1 {
		t.Errorf("store after a password change that failed holds %d sessions; want 1, the presented one", n)
	}
	if w := e.do("GET", "/api/auth/info", "", "Authorization: Token "+tok); w.Code != http.StatusOK {
		t.Errorf("info with the presented token after a password change that failed = %d; want 200", w.Code)
	}
	if w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"alice-pw"}`, jsonCT); w.Code != http.StatusOK {
		t.Errorf("login with the old password after a password change that failed = %d; want 200", w.Code)
	}
}
