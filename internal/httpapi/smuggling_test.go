package httpapi_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"authsvc/internal/httpapi"
)

// TestSmuggledRequestNotAnswered: a request hidden in a body is never
// answered, whether its framing is ambiguous over HTTP/1.1 (both
// Transfer-Encoding and Content-Length) or over HTTP/1.0, where net/http
// drops Transfer-Encoding unseen and keeps the connection alive.
func TestSmuggledRequestNotAnswered(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{})
	srv := httptest.NewServer(e.handler)
	defer srv.Close()
	const hidden = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
	for _, tt := range []struct{ name, raw string }{
		{"HTTP/1.0 keep-alive, chunked and Content-Length",
			"POST /api/auth/login/ HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\nContent-Type: application/json\r\n" +
				"Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n" + hidden},
		{"HTTP/1.0 keep-alive, Content-Length (a dropped Transfer-Encoding cannot be told apart)",
			"POST /api/auth/login/ HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\nContent-Type: application/json\r\n" +
				"Content-Length: 2\r\n\r\n{}" + hidden},
		{"HTTP/1.1, chunked and Content-Length",
			"POST /api/auth/login/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
				"Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n" + hidden},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.WriteString(c, tt.raw); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			first, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("first response: %v", err)
			}
			io.Copy(io.Discard, first.Body)
			first.Body.Close()
			if first.Header.Get("Connection") != "close" && !first.Close {
				t.Errorf("first response Connection = %q; want close", first.Header.Get("Connection"))
			}
			if second, err := http.ReadResponse(br, nil); err == nil {
				t.Errorf("the hidden request was answered: %s; want the connection closed", second.Status)
			}
		})
	}
}
