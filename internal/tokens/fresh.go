package tokens

import "context"

// freshKey is the context key of WithFresh.
type freshKey struct{}

// WithFresh returns ctx marked so that a Store's Lookup under it reads its
// backing service, never a copy it keeps in memory: what a caller needs
// before it acts on a field that other instances move, such as refusing a
// token for idleness on a LastUsedAt another instance may have advanced.
func WithFresh(ctx context.Context) context.Context {
	return context.WithValue(ctx, freshKey{}, true)
}

// Fresh reports whether ctx was marked by WithFresh.
func Fresh(ctx context.Context) bool {
	v, _ := ctx.Value(freshKey{}).(bool)
	return v
}
