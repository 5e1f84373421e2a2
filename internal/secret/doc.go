// Package secret owns the service's secret key: the key file (file.go: its
// exact format, its mode, creating it once even when several processes
// start at the same moment), the Key that never prints itself, sealing
// and opening values with it (AES-256-GCM, each value naming the key that
// sealed it), keyed fingerprints, and the Keyring that opens values sealed
// under an older key during a rotation. SyncDir, the directory fsync that
// ends the key file's creation, ends the users file's writes too.
//
// It knows bytes and file paths only: nothing of users, second factors,
// the directory or HTTP. What a value means and what additional data binds
// it to its owner is the caller's.
package secret
