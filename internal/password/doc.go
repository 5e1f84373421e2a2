// Package password owns password hashes: the schemes a users file may
// hold and how each is verified (hash.go, Django's forms exactly as Django
// checks them), the hash policy for new hashes and when an old one needs
// a rehash, the new-password rules (policy.go), and the pool of niced
// worker processes that run the checks (pool.go, worker.go).
//
// It knows nothing of users, tokens or HTTP.
package password
