// Package users owns who may log in: the Directory contract (directory.go)
// that its backings implement side by side (the users file in
// users/usersfile, PostgreSQL in users/postgres), the user record and its
// checks (users.go, account.go, factors.go), Authenticate and SessionUser
// and the cut rule they share with every backing (CutOf, NextCutoff), the
// operations on one user and the tokens each ends (ops.go), and usernames
// as Django makes them. Reading a Django dump is internal/djangoimport's.
//
// It knows password hashes only through package password (to validate,
// parse and verify them) and knows nothing of tokens, sessions or HTTP:
// what a token's death means to a session is the caller's, given a username
// and an issue time (SessionUser).
package users
