package redisstore

import (
	"context"
	"encoding/hex"
	"slices"
	"time"

	"authsvc/internal/redisurl"
	"authsvc/internal/tokens"

	"github.com/redis/go-redis/v9"
)

// Store is the token store kept in one Redis, or in a primary that
// Sentinel manages (Dial), shared by every server pointed at the same
// Redis and prefix. Its scripts reach token keys they compute from the
// index, so it needs all its keys on one server (ClusterStore spreads
// them over a Cluster's slots).
type Store struct {
	core
	client *redis.Client
	// tokenPrefix is the standalone layout's argument (layout.go): the
	// token key prefix (keyNamer.kindPrefix), which its scripts put before
	// a digest.
	tokenPrefix string
	// userPrefix is lookupScript's ARGV[1], as any so that no batch
	// allocates it again.
	userPrefix any
}

var (
	_ tokens.Store = (*Store)(nil)
	_ Cached       = (*Store)(nil)
)

// Dial returns a client of the Redis at rawURL (redis:// or, for TLS,
// rediss://), with the timeouts a login can afford. It does not connect:
// the first call does. Timeouts given in the URL (dial_timeout=,
// read_timeout=, ...) win. Its errors never quote the URL's password.
//
// A redis+sentinel:// or rediss+sentinel:// URL (redisurl.ParseSentinel)
// gives a client that follows a Sentinel-managed primary through
// failover, with the same timeouts.
func Dial(rawURL string) (*redis.Client, error) {
	if redisurl.IsSentinel(rawURL) {
		return dialSentinel(rawURL)
	}
	opt, err := redisurl.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	// go-redis logs every failed dial to the process's stderr, outside this
	// service's log; the failures reach the operator as "token store
	// unavailable" warnings instead. (SetLogger stores atomically.)
	redis.SetLogger(quietRedisLog{})
	return redis.NewClient(opt), nil
}

// New returns a store on client's Redis (see Dial), with
// keys under prefix ("" means DefaultPrefix), keeping up to
// DefaultCacheSize looked-up sessions (SetCacheSize); Ping tells whether Redis
// answers. Its Close stops the store's loops and leaves client open: the
// login throttle may share it.
func New(client *redis.Client, prefix string) *Store {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	keys := keyNamer{prefix: prefix}
	s := &Store{client: client, tokenPrefix: keys.kindPrefix("t"), userPrefix: keys.kindPrefix("u")}
	s.start(client, keys, client.Options().DB, s)
	return s
}

// run runs a user script of standaloneScripts, the token key prefix after
// args.
func (s *Store) run(ctx context.Context, script *redis.Script, keys []string, args []any) *redis.Cmd {
	return script.Run(ctx, s.client, keys, append(args, s.tokenPrefix)...)
}

// lookupScript looks up a batch of token keys. For each it returns the
// HMGET u s e l n reply, its n as the integer 0 (none) or 1 ("1") so
// that the reply's Go values need no allocation of their own (any other
// value stays as stored, a corrupt session), and then the digest's score
// in the user's index (its issue time in Unix ms) if the index still
// lists it, else 0; for a key or an index of the wrong type, 0, so that
// one corrupt key fails only its own look-up. One script per batch, not
// per look-up, since Redis spends more on starting a script than on the
// look-up itself.
//
// A session its user's index does not list is dead: RevokeUser finds
// sessions only through the index, so when Redis evicts an index
// (volatile-lru and allkeys-lru may), its sessions must die with it rather
// than outlive a logoutall. The script deletes such a session, since nothing
// else would find it to delete it; Issue writes a session and its index
// entry in one script, so none is ever seen between the two.
//
// KEYS token keys, each ending in its digest's 64 hex characters.
// ARGV[1] user index key prefix, ARGV[2] invalidation channel (a deleted
// session's digest is published there, for the instances that cached it).
const lookupScriptSource = `
local out = {}
for i, key in ipairs(KEYS) do
  local f = redis.pcall('HMGET', key, 'u', 's', 'e', 'l', 'n')
  if f.err then
    f = 0
  elseif f[1] then
    if not f[5] then
      f[5] = 0
    elseif f[5] == '1' then
      f[5] = 1
    end
    local listed = redis.pcall('ZSCORE', ARGV[1] .. f[1], string.sub(key, -64))
    if type(listed) == 'table' and listed.err then
      f = 0
    elseif listed then
      f[6] = listed
    else
      f[6] = 0
      redis.pcall('DEL', key) -- best effort: refused either way
      redis.pcall('PUBLISH', ARGV[2], 't:' .. string.sub(key, -64))
    end
  else
    f[5], f[6] = 0, 0
  end
  out[i] = f
end
return out
`

// lookupScriptHash is lookupScriptSource's SHA-1, for EVALSHA.
var lookupScriptHash = redis.NewScript(lookupScriptSource).Hash()

// sendLookups sends batch in one call of lookupScript.
func (s *Store) sendLookups(ctx context.Context, batch []lookupRequest, args []any) []any {
	// EVALSHA hash numkeys key... userPrefix; EVAL with the source
	// if Redis lost its script cache (a restart, SCRIPT FLUSH).
	args = append(args[:0], "evalsha", lookupScriptHash, len(batch))
	for _, req := range batch {
		args = append(args, req.key)
	}
	args = append(args, s.userPrefix, s.channel)
	res, err := s.client.Do(ctx, args...).Slice()
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		args[0], args[1] = "eval", lookupScriptSource
		res, err = s.client.Do(ctx, args...).Slice()
	}
	if err == nil && len(res) != len(batch) {
		err = errCorruptSession
	}
	for i, req := range batch {
		if err != nil {
			req.done <- lookupAnswer{err: err}
			continue
		}
		f, ok := res[i].([]any)
		if !ok {
			req.done <- lookupAnswer{err: errCorruptSession}
			continue
		}
		req.done <- lookupAnswer{fields: f}
	}
	clear(args) // let the keys go
	return args
}

// sendTouches writes a batch of uses in one call of touchScript.
func (s *Store) sendTouches(ctx context.Context, keys []string, uses []any) error {
	return touchScript.Run(ctx, s.client, keys, uses...).Err()
}

// Issue stores sess under d, atomically with the user index, the limit
// and the check of the user's current password stamp (issueLua).
func (s *Store) Issue(ctx context.Context, d tokens.Digest, sess tokens.Session, limit int, now time.Time) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	keys, args := s.issueArgs(d, sess, limit, now)
	res, err := s.run(ctx, standaloneScripts.issue, keys, args).Slice()
	evicted, _, err := s.issued(sess.Username, res, err)
	return evicted, err
}

// revokeScript deletes a token key and its index entry, and publishes the
// digest, found or not: an instance may have cached a session whose key
// Redis has since dropped on its own.
//
// KEYS[1] token key. ARGV[1] digest hex, ARGV[2] user index key prefix,
// ARGV[3] invalidation channel.
var revokeScript = redis.NewScript(`
local u = redis.call('HGET', KEYS[1], 'u')
if u then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', ARGV[2] .. u, ARGV[1])
end
redis.call('PUBLISH', ARGV[3], 't:' .. ARGV[1])
return 0
`)

// Revoke deletes the session under d and its index entry.
func (s *Store) Revoke(ctx context.Context, d tokens.Digest) error {
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	err := revokeScript.Run(ctx, s.client, []string{s.keys.token(d)},
		hex.EncodeToString(d[:]), s.userPrefix, s.channel).Err()
	// Refused here at once, whatever the reply: dropping is always safe.
	s.cache.forget(d)
	if err != nil {
		return unavailable("revoke", err)
	}
	return nil
}

// RevokeUser deletes every session of username and reports how many were
// live, and deletes the user's challenges, uncounted (revokeUserLua).
// Sessions whose index entry is gone are not counted; they were already
// dead to Lookup.
func (s *Store) RevokeUser(ctx context.Context, username string) (int, error) {
	keys, args := s.revokeUserArgs(username)
	return s.dropping(ctx, "revoke user", standaloneScripts.revokeUser, username, keys, args)
}

// Supersede keeps sup.Stamp as the user's current password stamp and
// deletes the sessions and challenges it supersedes, in one script
// (supersedeLua).
// Issue times are kept to the millisecond, rounded down, so a session
// issued within sup.Before's millisecond but before it is removed too; one
// issued in that millisecond after it is kept only if its score was bumped
// past it (logins of one user in one millisecond).
func (s *Store) Supersede(ctx context.Context, sup tokens.Supersession) (int, error) {
	keys, args := s.supersedeArgs(sup)
	return s.dropping(ctx, "supersede", standaloneScripts.supersede, sup.Username, keys, args)
}

// RevokeID deletes username's session with id, and reports whether there
// was one (revokeIDLua). The id does not tell which digest, so every
// cached session of the user is read again.
func (s *Store) RevokeID(ctx context.Context, username string, id tokens.SessionID) (bool, error) {
	keys, args := s.revokeIDArgs(username, id)
	n, err := s.dropping(ctx, "revoke session", standaloneScripts.revokeID, username, keys, args)
	return n == 1, err
}

// dropping runs a user script that drops sessions and returns how many
// token keys it deleted (its dropped). The user's cached sessions go
// whatever the reply: refused here at once, they are read again.
func (s *Store) dropping(ctx context.Context, op string, script *redis.Script, username string, keys []string, args []any) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	n, err := s.run(ctx, script, keys, args).Int()
	s.cache.forgetUser(username)
	if err != nil {
		return 0, unavailable(op, err)
	}
	return n, nil
}

// Import stores batch in pipelines of importBatch script calls
// (importLua), each session atomically on its own.
func (s *Store) Import(ctx context.Context, batch []tokens.Imported, now time.Time, dryRun bool) ([]tokens.ImportOutcome, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	if err := standaloneScripts.importOne.Load(ctx, s.client).Err(); err != nil {
		return nil, unavailable("import", err)
	}
	outcomes := make([]tokens.ImportOutcome, 0, len(batch))
	for chunk := range slices.Chunk(batch, importBatch) {
		cctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
		cmds, err := s.client.Pipelined(cctx, func(p redis.Pipeliner) error {
			for _, im := range chunk {
				keys, args := s.importArgs(im, now, dryRun, "", "")
				standaloneScripts.importOne.EvalSha(cctx, p, keys, append(args, s.tokenPrefix)...)
			}
			return nil
		})
		cancel()
		for _, im := range chunk {
			s.cache.forget(im.Digest)
		}
		if err != nil {
			return outcomes, unavailable("import", err)
		}
		out, err := importOutcomes(cmds)
		outcomes = append(outcomes, out...)
		if err != nil {
			return outcomes, unavailable("import", err)
		}
	}
	return outcomes, nil
}

// listScript returns username's sessions, newest first: for each, its
// digest hex, index score (issue time, Unix ms) and HMGET s e l i a g n.
//
// KEYS[1] user index key. ARGV[1] token key prefix.
var listScript = redis.NewScript(`
local out = {}
local all = redis.call('ZREVRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for j = 1, #all, 2 do
  local f = redis.call('HMGET', ARGV[1] .. all[j], 'u', 's', 'e', 'l', 'i', 'a', 'g', 'n')
  if f[1] then
    out[#out + 1] = {all[j], all[j + 1], f[2], f[3], f[4], f[5], f[6], f[7], f[8]}
  end
end
return out
`)

// List returns username's live sessions, newest first.
func (s *Store) List(ctx context.Context, username string, now time.Time) ([]tokens.ListedSession, error) {
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	rows, err := listScript.Run(ctx, s.client, []string{s.keys.index(username)}, s.tokenPrefix).Slice()
	if err != nil {
		return nil, unavailable("list", err)
	}
	return liveListed(username, rows, now)
}

// Ping reports whether Redis answers PING now.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	return pingError(s.client.Ping(ctx).Err())
}
