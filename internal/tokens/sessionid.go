package tokens

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
)

// A SessionID names a session to its owner (GET and DELETE
// /api/auth/sessions/). It is 128 random bits drawn apart from the token,
// so it says nothing about the token and authenticates nothing.
type SessionID [16]byte

// NewSessionID returns a fresh random session id.
func NewSessionID() SessionID {
	var id SessionID
	rand.Read(id[:])
	return id
}

// String is the id as clients see it: 32 lowercase hex characters.
func (id SessionID) String() string { return hex.EncodeToString(id[:]) }

// MarshalText lets a SessionID stand in a JSON reply as its string.
func (id SessionID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// ErrBadSessionID: a path's id is not 32 lowercase hex characters.
var ErrBadSessionID = errors.New("malformed session id")

// ParseSessionID parses the String form of an id.
func ParseSessionID(s string) (SessionID, error) {
	var id SessionID
	if len(s) != 2*len(id) {
		return id, ErrBadSessionID
	}
	for i := 0; i < len(id); i++ {
		hi, ok1 := fromHexLower(s[2*i])
		lo, ok2 := fromHexLower(s[2*i+1])
		if !ok1 || !ok2 {
			return SessionID{}, ErrBadSessionID
		}
		id[i] = hi<<4 | lo
	}
	return id, nil
}

// UnmarshalText parses the String form, so that a reply reads back.
func (id *SessionID) UnmarshalText(b []byte) error {
	parsed, err := ParseSessionID(string(b))
	if err != nil {
		return err
	}
	*id = parsed
	return nil
}
