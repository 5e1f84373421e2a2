package usersfile

import (
	"context"
	"crypto/sha256"

	"authsvc/internal/users"
)

// Personal access tokens: not yet indexed by this backend, which finds
// none (fail closed) until it is.

func (s *Directory) AccessToken(context.Context, [sha256.Size]byte) (*users.Account, *users.AccessToken, error) {
	return nil, nil, users.ErrNotFound
}

func (s *Directory) RecheckAccessToken(context.Context, [sha256.Size]byte) (*users.Account, *users.AccessToken, error) {
	return nil, nil, users.ErrNotFound
}

func (s *Directory) AccessTokens(context.Context, string) ([]users.AccessToken, error) {
	return nil, users.ErrNotFound
}
