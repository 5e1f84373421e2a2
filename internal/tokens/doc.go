// Package tokens owns the tokens: making them, parsing the Authorization
// header, their SHA-256 digests (the only form ever stored), session ids,
// the Store contract (store.go) and the memory store that implements it.
//
// It knows usernames as strings and nothing of users, passwords or HTTP
// handlers: whether a user still lets a session live is the caller's.
package tokens
