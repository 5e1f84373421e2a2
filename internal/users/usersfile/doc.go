// Package usersfile implements users.Directory on a JSON users file, for
// one server or a few sharing a disk: {"users": [...]}, each entry a
// users.User as encoding/json writes it.
//
// The file is read in one streaming pass (parse.go), checked exactly as
// the reference parser built on encoding/json checks it (read.go), into an
// in-memory index of users.Accounts (index.go) that a reload swaps in
// whole; a file that does not validate leaves the previous users in force.
// Writes hold the file's lock, copy every entry they do not touch byte for
// byte (edit.go) and replace the file atomically (write.go). Every change
// that kills tokens is first recorded in the cut-offs file beside it
// (cutoffs.go), so that an older copy of the file put back brings no dead
// token, deleted user or disabled login back. The Directory (directory.go)
// watches the file and reloads it when it changes.
//
// It knows the users contract and nothing of tokens or HTTP.
package usersfile
