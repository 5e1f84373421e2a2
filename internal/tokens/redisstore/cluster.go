package redisstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"authsvc/internal/redisurl"
	"authsvc/internal/tokens"

	"github.com/redis/go-redis/v9"
)

// Cluster mode (issue 22, point 3): the token store on a Redis Cluster,
// ClusterStore, made by NewCluster. One Redis's layout cannot be spread
// over slots: its scripts reach token keys they compute from the index.
// So a cluster store's keys carry hash tags, and it keeps a companion
// beside each index (keys.go), where every script touches only keys it
// declares, all of one slot. The user scripts are one Redis's, over the
// cluster layout (layout.go).
//
// An operation that needs both a user's keys and a token key is split: a
// script in the user's slot, which decides (the index is the source of
// truth), and plain commands on the token key, ordered so that the gap
// between the two never makes a dead session live. The argument that
// carries every split: Lookup returns a session only if, after reading its
// token key, it finds the digest still listed in its user's index (a
// second round trip, pipelined over the batch). So a token key left behind
// by a split (an Issue whose token write lands after a Supersede or
// RevokeUser removed its index entry, a DEL that failed) is dead to every
// instance, and Lookup deletes it when it meets it. Each split below says
// why its order is the right one.
//
// Invalidations are PUBLISHed as on one Redis (same channel, same
// payloads): a Redis Cluster forwards a PUBLISH to every node, so the
// subscriber hears it whichever node it is connected to. Each one is
// sent after the index stopped listing what it names, so a Lookup that
// reads after hearing it finds the session dead. Keyspace "evicted"
// events are local to a node and not heard; the README asks for
// noeviction.

// ClusterStore is the token store kept in a Redis Cluster, shared by
// every server pointed at the same cluster and prefix.
type ClusterStore struct {
	core
	cc *redis.ClusterClient
}

var (
	_ tokens.Store = (*ClusterStore)(nil)
	_ Cached       = (*ClusterStore)(nil)
)

// NewCluster returns a store on a Redis Cluster (redisurl.ParseCluster,
// redis.NewClusterClient), with keys under prefix ("" means
// DefaultPrefix) in the cluster layout (keys.go). A prefix holding "{" or "}"
// is refused: it would move the hash tags and spread a user's keys over
// slots. Close leaves client open: the throttle may share it.
func NewCluster(client *redis.ClusterClient, prefix string) (*ClusterStore, error) {
	if strings.ContainsAny(prefix, "{}") {
		return nil, fmt.Errorf("redis cluster store: prefix %q holds a brace; the keys' hash tags need a prefix without", prefix)
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	s := &ClusterStore{cc: client}
	// A cluster has only database 0.
	s.start(client, keyNamer{prefix: prefix, open: "{", close: "}"}, 0, s)
	return s, nil
}

// run runs a user script of clusterScripts, username's companion after
// keys.
func (s *ClusterStore) run(ctx context.Context, script *redis.Script, username string, keys []string, args []any) *redis.Cmd {
	return script.Run(ctx, s.cc, append(keys, s.keys.companion(username)), args...)
}

// errClusterUsername reports a username whose keys would not share a slot:
// an empty one, or one starting with "}", makes an empty hash tag, and then
// Redis hashes each whole key apart.
var errClusterUsername = errors.New("username empty or starting with '}': no hash tag for its keys")

// checkClusterUser refuses a username errClusterUsername describes.
func checkClusterUser(username string) error {
	if username == "" || username[0] == '}' {
		return errClusterUsername
	}
	return nil
}

// Issue stores sess under d. The split: first the user-slot
// script (stamp check, index, eviction), then the token key, then the
// evicted token keys. If the stamp is refused nothing is written. Between
// the script and the token write the token is not found, which harms
// nobody: the caller has not handed it out yet. A Supersede or RevokeUser
// that runs in that gap removes the index entry (it is there already, so
// the Supersede judges it by the companion, as it would the session), and
// the token key written after is an orphan, dead to Lookup. An evicted
// session is dead once the script removed its entry; deleting its token
// key after only saves memory (Lookup deletes it too).
func (s *ClusterStore) Issue(ctx context.Context, d tokens.Digest, sess tokens.Session, limit int, now time.Time) (int, error) {
	if err := checkClusterUser(sess.Username); err != nil {
		return 0, fmt.Errorf("redis issue: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	keys, args := s.issueArgs(d, sess, limit, now)
	res, err := s.run(ctx, clusterScripts.issue, sess.Username, keys, args).Slice()
	n, dropped, err := s.issued(sess.Username, res, err)
	if err != nil {
		return 0, err
	}
	_, err = s.cc.TxPipelined(ctx, func(p redis.Pipeliner) error {
		writeToken(ctx, p, s.keys.token(d), sess, strconv.FormatInt(now.UnixMilli(), 10))
		return nil
	})
	if err != nil {
		return 0, unavailable("issue", err)
	}
	if evicted, _ := dropped.([]any); n > 0 {
		s.delTokens(ctx, evicted)
	}
	return n, nil
}

// writeToken queues on p the writes of sess's token key tkey, last used
// at used (Unix ms): the token half of an Issue or an Import, what
// storeSession writes on one Redis.
func writeToken(ctx context.Context, p redis.Pipeliner, tkey string, sess tokens.Session, used string) {
	p.HSet(ctx, tkey, "u", sess.Username, "s", strconv.FormatUint(sess.Stamp, 10), "l", used, "i", sess.ID.String(),
		"a", sess.Client, "g", sess.UserAgent)
	if sess.Enrolment {
		p.HSet(ctx, tkey, "n", enrolmentArg(true))
	} else {
		// A digest issued again without the mark (confirming an
		// authenticator) is a full session, even should its key have lived.
		p.HDel(ctx, tkey, "n")
	}
	if sess.ExpiresAt.IsZero() {
		// No stale expiry survives (a digest is not expected to come twice).
		p.HDel(ctx, tkey, "e")
		p.Persist(ctx, tkey)
	} else {
		p.HSet(ctx, tkey, "e", strconv.FormatInt(sess.ExpiresAt.UnixMilli(), 10))
		p.PExpireAt(ctx, tkey, time.UnixMilli(sess.ExpiresAt.UnixMilli()))
	}
}

// delTokens deletes the token keys of the digests (hex) given, and reports
// how many existed. Each DEL is its own slot's; they go in one pipeline.
func (s *ClusterStore) delTokens(ctx context.Context, digests []any) (int, error) {
	if len(digests) == 0 {
		return 0, nil
	}
	cmds, err := s.cc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, m := range digests {
			h, _ := m.(string)
			p.Del(ctx, s.keys.key("t", h))
		}
		return nil
	})
	n := 0
	for _, c := range cmds {
		n += int(c.(*redis.IntCmd).Val())
	}
	return n, err
}

// sendLookups answers a batch of look-ups as lookupScript would.
func (s *ClusterStore) sendLookups(ctx context.Context, batch []lookupRequest, args []any) []any {
	for i, ans := range s.lookupBatch(ctx, batch) {
		batch[i].done <- ans
	}
	return args
}

// lookupBatch is lookupScript on a Cluster: for each token key the HMGET
// u s e l n reply (n as enrolmentReply gives it) and the digest's score
// in its user's index (or 0), in two pipelined round trips: the token
// keys, then the indexes of those found. A token key whose index does
// not list it is dead (the splits above leave such orphans) and deleted,
// best effort, with its digest published. The index is read after the
// token key: a session revoked between the two reads was live at the
// first, so answering it is a Lookup that came before the Revoke.
func (s *ClusterStore) lookupBatch(ctx context.Context, batch []lookupRequest) []lookupAnswer {
	out := make([]lookupAnswer, len(batch))
	reads := make([]*redis.SliceCmd, len(batch))
	_, err := s.cc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, req := range batch {
			reads[i] = p.HMGet(ctx, req.key, "u", "s", "e", "l", "n")
		}
		return nil
	})
	if err != nil && !isReplyError(reads) {
		for i := range out {
			out[i].err = err
		}
		return out
	}
	scores := make([]*redis.FloatCmd, len(batch))
	digests := make([]string, len(batch))
	_, err = s.cc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, req := range batch {
			f, err := reads[i].Result()
			if err != nil {
				continue
			}
			u, ok := f[0].(string)
			if !ok {
				continue
			}
			digests[i] = s.keys.digestOf(req.key)
			scores[i] = p.ZScore(ctx, s.keys.index(u), digests[i])
		}
		return nil
	})
	var orphans []string
	for i := range batch {
		f, rerr := reads[i].Result()
		if rerr != nil {
			out[i].err = errCorruptSession // a key of the wrong type: its own look-up fails
			continue
		}
		if len(f) == 5 {
			f[4] = enrolmentReply(f[4])
		}
		if scores[i] == nil {
			out[i].fields = append(f, int64(0))
			continue
		}
		// Scores are integers (ms); FormatFloat 'f' -1 prints them as Redis does.
		sc, serr := scores[i].Result()
		switch {
		case serr == nil:
			out[i].fields = append(f, strconv.FormatFloat(sc, 'f', -1, 64))
		case errors.Is(serr, redis.Nil):
			out[i].fields = append(f, int64(0))
			orphans = append(orphans, digests[i])
		case err != nil && !isRedisError(serr):
			out[i].err = serr
		default:
			out[i].err = errCorruptSession
		}
	}
	if len(orphans) > 0 {
		s.cc.Pipelined(ctx, func(p redis.Pipeliner) error { // best effort: refused either way
			for _, h := range orphans {
				p.Del(ctx, s.keys.key("t", h))
				p.Publish(ctx, s.channel.(string), "t:"+h)
			}
			return nil
		})
	}
	return out
}

// enrolmentReply is a token key's n field as lookupScript gives it: 0 for
// none, 1 for "1", anything else as stored (a corrupt session).
func enrolmentReply(v any) any {
	switch v {
	case nil:
		return int64(0)
	case "1":
		return int64(1)
	}
	return v
}

// isRedisError reports whether err is a reply of Redis (WRONGTYPE, say),
// not a failure to reach it.
func isRedisError(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !errors.Is(err, redis.Nil)
}

// isReplyError reports whether every failed command of a pipeline failed
// with a reply of Redis: the pipeline reached Redis, and only the look-ups
// of those keys fail.
func isReplyError(cmds []*redis.SliceCmd) bool {
	for _, c := range cmds {
		if err := c.Err(); err != nil && !isRedisError(err) {
			return false
		}
	}
	return true
}

// Revoke deletes the session under d and its index entry: read the
// token's username (its
// slot), remove the index entry and its companion (the user's slot),
// publish, then delete the token key. The session is dead once the entry
// is gone (Lookup confirms the index); a token key left if the DEL fails
// is an orphan, dead to Lookup, which deletes it. The entry goes first so
// that "listed, but no token key" only ever means a token write that
// failed, which a second Import may finish (importLua, lostWrite), never a
// token revoked.
func (s *ClusterStore) Revoke(ctx context.Context, d tokens.Digest) error {
	// Refused here at once, whatever the reply: dropping is always safe.
	defer s.cache.forget(d)
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	dhex := hex.EncodeToString(d[:])
	tkey := s.keys.token(d)
	u, err := s.cc.HGet(ctx, tkey, "u").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return unavailable("revoke", err)
	}
	found := err == nil
	if found && checkClusterUser(u) == nil {
		_, err := s.cc.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.ZRem(ctx, s.keys.index(u), dhex)
			p.HDel(ctx, s.keys.companion(u), dhex)
			return nil
		})
		if err != nil {
			return unavailable("revoke", err)
		}
	}
	// Published found or not: an instance may have cached a session whose
	// key Redis has since dropped on its own.
	if err := s.cc.Publish(ctx, s.channel.(string), "t:"+dhex).Err(); err != nil {
		return unavailable("revoke", err)
	}
	if found {
		if err := s.cc.Del(ctx, tkey).Err(); err != nil {
			return unavailable("revoke", err)
		}
	}
	return nil
}

// RevokeUser deletes every session of username and reports how many were
// live, and deletes the user's challenges, uncounted: the script empties
// the user's index (from then on every session of theirs is dead to
// Lookup, and the publish tells the caches), then the token keys go,
// counted as one Redis's script counts them (those that still existed). A
// session issued in between whose index entry came after the script
// lives: it was issued after the logoutall.
func (s *ClusterStore) RevokeUser(ctx context.Context, username string) (int, error) {
	keys, args := s.revokeUserArgs(username)
	n, _, err := s.dropping(ctx, "revoke user", clusterScripts.revokeUser, username, keys, args)
	return n, err
}

// Supersede keeps sup.Stamp as the user's current password stamp and
// deletes the sessions and challenges it supersedes (supersedeLua).
// Issue's stamp check and this script's stamp rule both run in the user's
// slot, so they are atomic with respect to each other as on one Redis: a
// login either ran its script before (its entry is here, judged by its
// companion's stamp, and removed) or after (refused by the new stamp). Its
// token key, written after its script, may land after this call's DELs:
// then it is an orphan, dead to Lookup. Then the superseded token keys
// go, counted as one Redis's script counts them.
func (s *ClusterStore) Supersede(ctx context.Context, sup tokens.Supersession) (int, error) {
	keys, args := s.supersedeArgs(sup)
	n, _, err := s.dropping(ctx, "supersede", clusterScripts.supersede, sup.Username, keys, args)
	return n, err
}

// RevokeID deletes username's session with id, and reports whether there
// was one: the script removes the entry (dead from then on), then its
// token key goes.
func (s *ClusterStore) RevokeID(ctx context.Context, username string, id tokens.SessionID) (bool, error) {
	keys, args := s.revokeIDArgs(username, id)
	_, found, err := s.dropping(ctx, "revoke session", clusterScripts.revokeID, username, keys, args)
	return found, err
}

// dropping runs a user script that drops sessions, then deletes the token
// keys of its dropped; it returns how many of those still existed, and
// whether it dropped any. The user's cached sessions go whatever the
// reply: refused here at once, they are read again.
func (s *ClusterStore) dropping(ctx context.Context, op string, script *redis.Script, username string, keys []string, args []any) (int, bool, error) {
	if err := checkClusterUser(username); err != nil {
		return 0, false, fmt.Errorf("redis %s: %w", op, err)
	}
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	dropped, err := s.run(ctx, script, username, keys, args).Slice()
	s.cache.forgetUser(username)
	if err != nil {
		return 0, false, unavailable(op, err)
	}
	n, err := s.delTokens(ctx, dropped)
	if err != nil {
		return n, len(dropped) > 0, unavailable(op, err)
	}
	return n, len(dropped) > 0, nil
}

// List returns username's live sessions, newest first: the index, then
// the token keys it lists, in one pipeline, into listScript's rows.
func (s *ClusterStore) List(ctx context.Context, username string, now time.Time) ([]tokens.ListedSession, error) {
	if err := checkClusterUser(username); err != nil {
		return nil, fmt.Errorf("redis list: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	all, err := s.cc.ZRevRangeWithScores(ctx, s.keys.index(username), 0, -1).Result()
	if err != nil {
		return nil, unavailable("list", err)
	}
	if len(all) == 0 {
		return nil, nil
	}
	cmds := make([]*redis.SliceCmd, len(all))
	_, err = s.cc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, z := range all {
			h, _ := z.Member.(string)
			cmds[i] = p.HMGet(ctx, s.keys.key("t", h), "u", "s", "e", "l", "i", "a", "g", "n")
		}
		return nil
	})
	if err != nil {
		return nil, unavailable("list", err)
	}
	rows := make([]any, 0, len(all))
	for i, z := range all {
		f := cmds[i].Val()
		if len(f) != 8 || f[0] == nil {
			continue
		}
		rows = append(rows, append([]any{z.Member, strconv.FormatFloat(z.Score, 'f', -1, 64)}, f[1:]...))
	}
	return liveListed(username, rows, now)
}

// clusterRefreshScript sets an existing token key's expiry: never creates
// one, so a refresh racing a Revoke cannot leave a key without a user.
//
// KEYS[1] token key. ARGV[1] expiry (Unix ms; "" = never).
var clusterRefreshScript = redis.NewScript(setExpiryLua + `
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
setExpiry(KEYS[1], ARGV[1])
return 1
`)

// Import stores batch, per chunk in three pipelines: the
// token keys read, the user-slot scripts, then the token keys written (or
// refreshed, and their digests published). The split's order is Issue's:
// the index entry first, so a RevokeUser or Supersede that comes between
// leaves the token key written after an orphan, dead to Lookup; and the
// imported mark is set with the entry, so importing again then reports it
// dead, never bringing it back. A failure part way may leave entries whose
// token key was not written: not found by Lookup, and importing again
// finds them marked and listed with no token key, which only a failed
// token write leaves (every path that kills a session removes the entry
// before the key), and writes the key: the second import finishes the job
// as the contract asks.
func (s *ClusterStore) Import(ctx context.Context, batch []tokens.Imported, now time.Time, dryRun bool) ([]tokens.ImportOutcome, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	for _, im := range batch {
		if err := checkClusterUser(im.Session.Username); err != nil {
			return nil, fmt.Errorf("redis import: %w", err)
		}
	}
	if err := clusterScripts.importOne.Load(ctx, s.cc).Err(); err != nil {
		return nil, unavailable("import", err)
	}
	if err := clusterRefreshScript.Load(ctx, s.cc).Err(); err != nil {
		return nil, unavailable("import", err)
	}
	outcomes := make([]tokens.ImportOutcome, 0, len(batch))
	for chunk := range slices.Chunk(batch, importBatch) {
		out, err := s.importChunk(ctx, chunk, now, dryRun)
		for _, im := range chunk {
			s.cache.forget(im.Digest)
		}
		outcomes = append(outcomes, out...)
		if err != nil {
			return outcomes, unavailable("import", err)
		}
	}
	return outcomes, nil
}

func (s *ClusterStore) importChunk(ctx context.Context, chunk []tokens.Imported, now time.Time, dryRun bool) ([]tokens.ImportOutcome, error) {
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	reads := make([]*redis.SliceCmd, len(chunk))
	if _, err := s.cc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, im := range chunk {
			reads[i] = p.HMGet(ctx, s.keys.token(im.Digest), "u", "e")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	cmds, err := s.cc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, im := range chunk {
			f := reads[i].Val()
			tu, _ := f[0].(string)
			te, _ := f[1].(string)
			keys, args := s.importArgs(im, now, dryRun, tu, te)
			clusterScripts.importOne.EvalSha(ctx, p, append(keys, s.keys.companion(im.Session.Username)), args...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	outcomes, err := importOutcomes(cmds)
	if err != nil {
		return nil, err
	}
	if dryRun {
		return outcomes, nil
	}
	ms := strconv.FormatInt(now.UnixMilli(), 10)
	_, err = s.cc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, im := range chunk {
			tkey := s.keys.token(im.Digest)
			switch outcomes[i] {
			case tokens.ImportAdded:
				// Without client, agent or mark, as importLua stores one.
				sess := im.Session
				sess.Client, sess.UserAgent, sess.Enrolment = "", "", false
				writeToken(ctx, p, tkey, sess, ms)
			case tokens.ImportRefreshed:
				clusterRefreshScript.EvalSha(ctx, p, []string{tkey}, unixMsOrNever(im.Session.ExpiresAt))
				// Cached copies hold the old expiry.
				p.Publish(ctx, s.channel.(string), "t:"+hex.EncodeToString(im.Digest[:]))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return outcomes, nil
}

// sendTouches writes a batch of uses with touchScript, one key
// per call (keys of a batch lie in many slots), in one pipeline of
// EVALSHAs; if a node lost its script cache (a restart, SCRIPT FLUSH) the
// script is loaded on every primary and the batch sent again, which does
// no harm (the script never moves a use back).
func (s *ClusterStore) sendTouches(ctx context.Context, keys []string, args []any) error {
	send := func() error {
		_, err := s.cc.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, key := range keys {
				touchScript.EvalSha(ctx, p, []string{key}, args[i])
			}
			return nil
		})
		return err
	}
	err := send()
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		if err := touchScript.Load(ctx, s.cc).Err(); err != nil {
			return err
		}
		err = send()
	}
	return err
}

// Ping reports whether every primary answers PING now, since each holds
// some users' and some tokens' keys.
func (s *ClusterStore) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	return pingError(s.cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		return c.Ping(ctx).Err()
	}))
}

// DialCluster returns a client of the Redis Cluster at rawURL
// (redis+cluster:// or rediss+cluster://, redisurl.ParseCluster), with
// the bounds Dial gives a single Redis, and go-redis's own log quieted as
// Dial quiets it. It does not connect: the first call does. Its errors
// never quote the URL's password.
func DialCluster(rawURL string) (*redis.ClusterClient, error) {
	opt, err := redisurl.ParseCluster(rawURL)
	if err != nil {
		return nil, err
	}
	redis.SetLogger(quietRedisLog{})
	return redis.NewClusterClient(opt), nil
}
