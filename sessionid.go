package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
)

// A sessionID names a session to its owner (GET and DELETE
// /api/auth/sessions/). It is 128 random bits drawn apart from the token,
// so it says nothing about the token and authenticates nothing.
type sessionID [16]byte

// newSessionID returns a fresh random session id.
func newSessionID() sessionID {
	var id sessionID
	rand.Read(id[:])
	return id
}

// String is the id as clients see it: 32 lowercase hex characters.
func (id sessionID) String() string { return hex.EncodeToString(id[:]) }

// MarshalText lets a sessionID stand in a JSON reply as its string.
func (id sessionID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// errBadSessionID: a path's id is not 32 lowercase hex characters.
var errBadSessionID = errors.New("malformed session id")

// parseSessionID parses the String form of an id.
func parseSessionID(s string) (sessionID, error) {
	var id sessionID
	if len(s) != 2*len(id) {
		return id, errBadSessionID
	}
	for i := 0; i < len(id); i++ {
		hi, ok1 := fromHexLower(s[2*i])
		lo, ok2 := fromHexLower(s[2*i+1])
		if !ok1 || !ok2 {
			return sessionID{}, errBadSessionID
		}
		id[i] = hi<<4 | lo
	}
	return id, nil
}

// UnmarshalText parses the String form, so that a reply reads back.
func (id *sessionID) UnmarshalText(b []byte) error {
	parsed, err := parseSessionID(string(b))
	if err != nil {
		return err
	}
	*id = parsed
	return nil
}
