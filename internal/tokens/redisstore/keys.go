package redisstore

import (
	"encoding/hex"

	"authsvc/internal/tokens"
)

// Key layout, under a prefix (default "authsvc:"); only digests and session
// fields are stored, never a usable token. The keys of one Redis (New)
// and of a Cluster (NewCluster) differ in two ways only: on a Cluster the
// id (username or digest) after the kind stands between braces, a hash
// tag, so that every key of one user, or of one digest, lies in one slot
// (prefix + "u:{alice}"); and a Cluster keeps a companion beside each
// index:
//
//	{prefix}t:{digest hex}  hash u=username s=stamp [e=expiry Unix ms]
//	                        l=last use (Unix ms) i=session id hex
//	                        a=client g=user agent [n=1: an enrolment-only
//	                        session, Session.Enrolment; no n, a full
//	                        one, as every session of older versions];
//	                        PEXPIREAT e (no e, no expiry)
//	{prefix}u:{username}    sorted set of digest hex, scored by issue time in
//	                        Unix ms, strictly increasing per user; expires
//	                        with the user's last session. The source of
//	                        truth for which sessions live
//	{prefix}g:{username}    the user's current password stamp, as the last
//	                        Supersede gave it (decimal); PEXPIREAT its
//	                        Until (none, no expiry)
//	{prefix}b:{username}    the cut-off (Unix ms) of the user's latest
//	                        Supersede, which a stale one may not undo;
//	                        PEXPIREAT its Until (none, no expiry)
//	{prefix}m:{username}    hash of the digest hex Import stored for the
//	                        user (value "1"), kept for ever, so that an
//	                        import never brings a dead one back
//	{prefix}c:{digest hex}  a challenge's (mfa_token's) username, nothing
//	                        else; PEXPIREAT its expiry. It only leads to the
//	                        user's challenges: without its field there the
//	                        challenge is gone
//	{prefix}w:{username}    hash of the user's pending challenges, digest
//	                        hex → "stamp issued expiry attempts-left",
//	                        with " c" after it while claimed
//	                        (ClaimChallenge; times in Unix ms);
//	                        PEXPIREAT the latest expiry
//	{prefix}o:{username}    the user's last accepted TOTP counter, "counter"
//	                        or "counter until" (Unix ms), PEXPIREAT until
//	{prefix}x:{username}    Cluster only: the index's companion, hash of
//	                        digest hex → "expiry stamp id" (expiry Unix
//	                        ms, "" for never), what the user's scripts need
//	                        to prune, evict, supersede and revoke by id
//	                        without reading token keys, which lie in other
//	                        slots; expires with the index
//
// The challenge and TOTP counter scripts touch only keys named by the
// username they are given, declared in KEYS; a challenge's c: key is read
// and written by plain commands beside them.
const DefaultPrefix = "authsvc:"

// keyNamer names a store's keys: the one rule above, with the hash tag's
// braces in open and close on a Cluster, empty on one Redis. A Cluster's
// prefix holds no brace (NewCluster), so the tag starts right after the
// kind and ends at the first "}" after it, the same for every key of the
// user.
type keyNamer struct {
	prefix      string
	open, close string
}

// kindPrefix is what every key of kind holds before its id: on one Redis,
// where the scripts compute token keys, the prefix they put before a
// digest.
func (k keyNamer) kindPrefix(kind string) string { return k.prefix + kind + ":" + k.open }

// key is the key of kind for id, a username or a digest's hex.
func (k keyNamer) key(kind, id string) string { return k.prefix + kind + ":" + k.open + id + k.close }

// digestOf returns the digest hex that ends key, a token or challenge key.
func (k keyNamer) digestOf(key string) string {
	end := len(key) - len(k.close)
	return key[end-2*len(tokens.Digest{}) : end]
}

func (k keyNamer) token(d tokens.Digest) string      { return k.key("t", hex.EncodeToString(d[:])) }
func (k keyNamer) challenge(d tokens.Digest) string  { return k.key("c", hex.EncodeToString(d[:])) }
func (k keyNamer) index(username string) string      { return k.key("u", username) }
func (k keyNamer) stamp(username string) string      { return k.key("g", username) }
func (k keyNamer) cutoff(username string) string     { return k.key("b", username) }
func (k keyNamer) imported(username string) string   { return k.key("m", username) }
func (k keyNamer) challenges(username string) string { return k.key("w", username) }
func (k keyNamer) counter(username string) string    { return k.key("o", username) }
func (k keyNamer) companion(username string) string  { return k.key("x", username) }
