// Package throttle owns the login throttle's rules: the Throttle contract,
// its limits and their defaults (Config, DefaultConfig), and the memory
// throttle that one process keeps. A failure streak per (username, client)
// backs off, a ceiling per username holds over all clients, and a token
// bucket per client address bounds guesses over all usernames.
//
// It knows usernames and client keys as strings, and nothing of users,
// tokens or HTTP.
package throttle
