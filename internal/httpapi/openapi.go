package httpapi

import (
	_ "embed"
	"net/http"
	"strconv"
)

// openAPIDoc is the OpenAPI 3.1 description of the API (API.md), served at
// GET /api/openapi.json.
//
//go:embed openapi.json
var openAPIDoc []byte

// handleOpenAPI serves openAPIDoc.
func handleOpenAPI() http.Handler {
	length := strconv.Itoa(len(openAPIDoc))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", length)
		h.Set("Cache-Control", "public, max-age=300")
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			w.Write(openAPIDoc)
		}
	})
}
