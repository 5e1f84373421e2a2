package introspect_test

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	"authsvc/clients/go/introspect"
)

// A service puts the middleware in front of its routes. Its own token is
// a personal access token with the introspect scope, made once by an
// operator for a service account (authsvc token create --name orders
// --scope introspect svc-orders) and handed to it like any secret; here,
// from the environment.
func Example() {
	auth, err := introspect.New(introspect.Config{
		URL:      "http://127.0.0.1:8080",
		Token:    os.Getenv("AUTHSVC_INTROSPECT_TOKEN"),
		Group:    "orders",        // optional: only members of this group
		CacheTTL: 5 * time.Second, // optional: a revocation takes up to 5 s here
	})
	if err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders", func(w http.ResponseWriter, r *http.Request) {
		who, _ := introspect.FromContext(r.Context())
		fmt.Fprintf(w, "orders of %s (admin: %v, via a %s)\n", who.Username, who.Admin, who.TokenType)
	})
	log.Fatal(http.ListenAndServe("127.0.0.1:9000", auth.Wrap(mux)))
}
