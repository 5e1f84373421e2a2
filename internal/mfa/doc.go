// Package mfa owns the second factors as values: TOTP authenticators
// (totp.go: secrets, the otpauth:// URL an app scans, checking a code
// against the drift window and the last accepted counter, the fields of a
// django-otp device) and recovery codes (recovery.go: making them, the
// normal form a typed code or an imported django-otp static token takes,
// their keyed hashes and matching one).
//
// It never reads the clock (the caller passes the time) and never keeps
// state: Check reports the counter it accepted and the caller records it.
// It knows nothing of users, HTTP, the directory or storage; sealing the
// secret and the key of the hashes are package secret's.
package mfa
