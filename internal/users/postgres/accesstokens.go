package postgres

import (
	"context"
	"crypto/sha256"

	"authsvc/internal/users"
)

// Personal access tokens: not yet indexed by this backend, which finds
// none (fail closed) until it is.

func (d *Directory) AccessToken(context.Context, [sha256.Size]byte) (*users.Account, *users.AccessToken, error) {
	return nil, nil, users.ErrNotFound
}

func (d *Directory) RecheckAccessToken(context.Context, [sha256.Size]byte) (*users.Account, *users.AccessToken, error) {
	return nil, nil, users.ErrNotFound
}

func (d *Directory) AccessTokens(context.Context, string) ([]users.AccessToken, error) {
	return nil, users.ErrNotFound
}
