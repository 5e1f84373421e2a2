package httpapi

import "net/http"

// mustClose reports whether the connection must close after r, lest a
// request hidden in r's body be answered (request smuggling):
//   - r had a Transfer-Encoding: net/http keeps a connection open after a
//     request with both Transfer-Encoding and Content-Length, and RFC 9112
//     §6.1 says close, since a proxy framing by Content-Length would read
//     the rest of the body as a request of its own;
//   - r is HTTP/1.0: net/http drops an HTTP/1.0 request's
//     Transfer-Encoding before a handler can see it and frames the body by
//     Content-Length, so any HTTP/1.0 request may be that ambiguous case.
//     Keep-alive over HTTP/1.0 is rare enough to give up.
func mustClose(r *http.Request) bool {
	return len(r.TransferEncoding) > 0 || !r.ProtoAtLeast(1, 1)
}
