// Package users owns who may log in: the Directory contract (directory.go)
// and the users file that implements it (file.go, with its streaming
// parser, editor and in-memory index), the operations on one user and the
// tokens each ends (ops.go), usernames as Django makes them, the user
// record and its checks, and reading a Django dumpdata file into users.
//
// It knows password hashes only through package password (to validate,
// parse and verify them) and knows nothing of tokens, sessions or HTTP:
// what a token's death means to a session is the caller's, given a username
// and an issue time (SessionUser).
package users
