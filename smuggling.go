package main

import "net/http"

// mustClose reports whether the connection must close after r, lest a
// request be smuggled: net/http keeps a connection open after a request
// that had both Transfer-Encoding and Content-Length, and RFC 9112 §6.1
// says close, since a proxy framing by Content-Length would read the rest
// of the body as a request of its own.
func mustClose(r *http.Request) bool {
	return len(r.TransferEncoding) > 0
}
