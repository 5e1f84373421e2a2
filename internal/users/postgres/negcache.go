package postgres

import (
	"crypto/sha256"
	"time"

	"authsvc/internal/lru"
)

// A made-up personal access token with a valid checksum (the CRC is no
// secret) passes every check before the directory, and a digest the
// instance does not hold in memory is looked up in the database. So that
// a flood of one such token is not a flood of queries, the instance
// remembers, for pgAbsentTTL, the digests the database held none of.
//
// Such a record stands only while no change has reached the instance
// since the read that found nothing: it carries d.epoch as the read took
// it, and every invalidation bumps the epoch, whether this instance wrote
// (write) or the change log told it of another's write (catchUp, on a
// NOTIFY or the poll; a SIGHUP's dropAll too). A token minted on another
// instance is thus found here as soon as that write reaches this
// instance, as a revocation is refused, not when the record expires;
// the expiry bounds only what no change log shows (a row edited by hand).
// A minted token is 256 random bits: no one asks for its digest before
// it exists, so in practice the records hold only made-up tokens.
//
// Only absence is recorded, and only from a read that worked: a query
// that fails, or a row that does not load, records nothing (fail
// closed), and a token found removes the digest's record. The records
// are bounded (pgAbsentMax, least recently recorded out first) and apart
// from the tokens found, so that made-up digests never push out a live
// token. A flood of distinct made-up tokens still costs a query each:
// there is nothing to remember about a digest not yet asked for.
const (
	// pgAbsentTTL is how long a digest the database held none of is
	// answered as absent without asking again: well within the 5 s in
	// which API.md wants a change to reach every instance.
	pgAbsentTTL = time.Second
	// pgAbsentMax bounds the records: about 150 bytes each.
	pgAbsentMax = 10_000
)

// absentDigests are the digests of personal access tokens the database
// was found to hold none of. Its owner's mutex (Directory.mu) guards it.
type absentDigests struct {
	recs *lru.Cache[[sha256.Size]byte, absentRecord] // nil until the first record
	ttl  time.Duration                               // 0: pgAbsentTTL (a test sets its own)
}

// An absentRecord is one read that found no token of a digest.
type absentRecord struct {
	epoch uint64 // Directory.epoch when the read began
	until int64  // Unix ns: the read's start plus the TTL
}

// has reports whether a read begun at epoch, no longer than the TTL
// before now, found no token of digest, and no change has reached the
// instance since (epoch is still the directory's).
func (a *absentDigests) has(digest [sha256.Size]byte, epoch uint64, now time.Time) bool {
	if a.recs == nil {
		return false
	}
	r, ok := a.recs.Get(digest)
	return ok && r.epoch == epoch && now.UnixNano() < r.until
}

// add records that a read begun at now, at epoch, found no token of
// digest.
func (a *absentDigests) add(digest [sha256.Size]byte, epoch uint64, now time.Time) {
	if a.recs == nil {
		a.recs = lru.New[[sha256.Size]byte, absentRecord](pgAbsentMax)
	}
	ttl := a.ttl
	if ttl == 0 {
		ttl = pgAbsentTTL
	}
	a.recs.Put(digest, absentRecord{epoch: epoch, until: now.Add(ttl).UnixNano()})
}

// remove forgets digest's record: a read found its token.
func (a *absentDigests) remove(digest [sha256.Size]byte) {
	if a.recs != nil {
		a.recs.Remove(digest)
	}
}
