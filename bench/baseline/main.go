// Command baseline is the yardstick of `make bench`: a bare net/http server
// that does only the work authsvc cannot avoid. /api/auth/info reads the
// authorization header, looks the token up in a map and writes a fixed small
// JSON body; /api/auth/login/ decodes the JSON body and runs one bcrypt
// compare against the users file's hash (so at the same cost as authsvc).
// It has no admission control, no throttle, no access log and no routing
// beyond three paths: that is the point of the comparison. With -limits it
// sets the server limits authsvc serve sets (internal/cli/serve.go): the
// header, read, write and idle timeouts cost net/http a few deadline
// changes and clock reads a request, which the bare baseline does not pay.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// infoBody is the fixed /info reply: authsvc's reply for the bench's /info user.
var infoBody = []byte(`{"username":"reader","name":"reader","email":"reader@example.com","groups":["bench"],"admin":false}` + "\n")

type server struct {
	hashes   map[string][]byte // username → bcrypt hash, read-only after start
	mu       sync.RWMutex      // guards tokens
	tokens   map[string]string // token → username
	inflight atomic.Int64      // login requests being served, for the harness to wait on
}

func (s *server) info(w http.ResponseWriter, r *http.Request) {
	v := r.Header.Get("Authorization")
	if len(v) <= 6 || !strings.EqualFold(v[:6], "token ") {
		http.Error(w, `{"detail":"no"}`, http.StatusUnauthorized)
		return
	}
	s.mu.RLock()
	_, ok := s.tokens[v[6:]]
	s.mu.RUnlock()
	if !ok {
		http.Error(w, `{"detail":"no"}`, http.StatusUnauthorized)
		return
	}
	w.Header()["Content-Type"] = []string{"application/json"}
	w.Write(infoBody)
}

func (s *server) login(w http.ResponseWriter, r *http.Request) {
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	var req struct {
		Username string `json:"username"`
		Password string `json:"password"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"detail":"bad"}`, http.StatusBadRequest)
		return
	}
	hash, ok := s.hashes[req.Username]
	if !ok || bcrypt.CompareHashAndPassword(hash, []byte(req.Password)) != nil {
		http.Error(w, `{"detail":"no"}`, http.StatusUnauthorized)
		return
	}
	var raw [20]byte
	rand.Read(raw[:])
	token := hex.EncodeToString(raw[:])
	s.mu.Lock()
	s.tokens[token] = req.Username
	s.mu.Unlock()
	w.Header()["Content-Type"] = []string{"application/json"}
	fmt.Fprintf(w, "{\"token\":%q}\n", token)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "listen address")
	usersPath := flag.String("users", "users.json", "authsvc users file (only username and password_hash are read)")
	limits := flag.Bool("limits", false, "set authsvc serve's server limits (timeouts 10s header and read, 30s write, 120s idle; 32 KiB of headers)")
	flag.Parse()

	data, err := os.ReadFile(*usersPath)
	if err != nil {
		log.Fatal(err)
	}
	var doc struct {
		Users []struct {
			Username     string `json:"username"`
			PasswordHash string `json:"password_hash"`
		} `json:"users"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		log.Fatalf("%s: %v", *usersPath, err)
	}
	s := &server{hashes: make(map[string][]byte), tokens: make(map[string]string)}
	for _, u := range doc.Users {
		s.hashes[u.Username] = []byte(u.PasswordHash)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/auth/info", s.info)
	mux.HandleFunc("POST /api/auth/login/", s.login)
	mux.HandleFunc("GET /inflight", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strconv.FormatInt(s.inflight.Load(), 10) + "\n"))
	})
	srv := &http.Server{Addr: *addr, Handler: mux}
	if *limits { // as internal/cli/serve.go's newHTTPServer
		srv.ReadHeaderTimeout, srv.ReadTimeout = 10*time.Second, 10*time.Second
		srv.WriteTimeout, srv.IdleTimeout = 30*time.Second, 120*time.Second
		srv.MaxHeaderBytes = 32 << 10
	}
	log.Printf("baseline listening on %s (%d users, limits %v)", *addr, len(s.hashes), *limits)
	log.Fatal(srv.ListenAndServe())
}
