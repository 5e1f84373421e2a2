// Package httpapi is the HTTP API of API.md: the server and its routes
// (server.go), the handlers, the token check (tokencheck.go), the login
// guard that every password check goes through (login.go: throttle,
// admission, tarpit, audit), password change and sessions, error replies
// (respond.go), the access log, CORS, metrics and the OpenAPI document.
//
// It is handed its dependencies (Deps) and knows the users, tokens,
// throttle and password packages only through their contracts. It knows
// nothing of flags, environment variables or how the stores were opened.
package httpapi
