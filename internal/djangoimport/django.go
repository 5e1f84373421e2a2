package djangoimport

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"authsvc/internal/mfa"
	"authsvc/internal/password"
	"authsvc/internal/secret"
	"authsvc/internal/users"
)

// A djangoRecord is one record of `manage.py dumpdata`'s JSON output.
type djangoRecord struct {
	Model  string          `json:"model"`
	PK     json.RawMessage `json:"pk"`
	Fields json.RawMessage `json:"fields"`
}

// djangoUser is the fields of an auth.user record that authsvc maps.
type djangoUser struct {
	Username    string          `json:"username"`
	Password    string          `json:"password"`
	FirstName   string          `json:"first_name"`
	LastName    string          `json:"last_name"`
	Email       string          `json:"email"`
	IsActive    *bool           `json:"is_active"`
	IsStaff     bool            `json:"is_staff"`
	IsSuperuser bool            `json:"is_superuser"`
	Groups      json.RawMessage `json:"groups"`
}

// djangoToken is the fields of an authtoken.token record; its key is the
// record's pk.
type djangoToken struct {
	User    json.RawMessage `json:"user"`
	Created string          `json:"created"`
}

// A Token is a Django REST framework key of an imported user. Key is
// the token itself: it must never reach a log line or an error.
type Token struct {
	Key      string
	Username string
	Created  time.Time
}

// A Dump is what Read maps: the users, their DRF keys,
// their django-otp factors, and the records it leaves out.
type Dump struct {
	Users  []users.User
	Tokens []Token
	// Factors are the django-otp factors of the imported users, by
	// username, in clear: SealFactors stores them in the users' MFA.
	Factors map[string]*Factors
	Skipped []Skip

	dumped []string     // each user's hash as Django dumped it
	legacy []legacyHash // the users whose hash is a legacy fast form, not wrapped yet
	// copied are the second factors of a users file's users (FromUsers),
	// by username, which the import copies as they are; nil for a Django
	// dump.
	copied map[string]*users.Factors
}

// FromUsers returns the dump of an authsvc users file's users, list
// (user import --from file, to move a users file into PostgreSQL): the
// users are imported as they are, their second factors copied sealed as
// they are. It holds no DRF key and no device.
func FromUsers(list []users.User) *Dump {
	copied := make(map[string]*users.Factors, len(list))
	for _, u := range list {
		copied[u.Username] = u.MFA
	}
	return &Dump{Users: list, copied: copied}
}

// CountSkipped counts the records of model the dump leaves out (as
// Skip.Model names it).
func (d *Dump) CountSkipped(model string) int {
	n := 0
	for _, s := range d.Skipped {
		if s.Model() == model {
			n++
		}
	}
	return n
}

// Skip is a record the importer leaves out, and why.
type Skip struct {
	model, at, reason string
}

func (s Skip) String() string { return s.at + ": " + s.reason }

// Model is the model of the record left out, as the dump names it
// (auth.user, authtoken.token), or "second factor" for every django-otp
// record (devices and static tokens), which the import counts together.
func (s Skip) Model() string { return s.model }

// Parse maps the auth.user records of a dumpdata JSON array to
// users (API.md "Users"): username (NFKC), password hash as is, name from
// first and last name, email, disabled when not active or the password is
// unusable, admin when staff or superuser, groups by name. Groups may be
// natural keys (--natural-foreign, as API.md asks) or primary keys of the
// dump's own auth.group records. Records of other models are passed over;
// a user record that cannot be mapped is skipped with its reason.
//
// Each authtoken.token record of an imported user becomes a Token,
// created at its created time (a time without a zone is taken as UTC; one
// after now, as now). now is every imported user's cut-off, or the created
// time of its earliest token when that is earlier, so that importing does
// not kill the tokens it brings; no token of an earlier user of the same
// name lives on past it. A token whose key is not 40 lowercase hex
// characters, as DRF makes them and as authsvc checks them, is skipped.
//
// The django-otp devices of imported users come out in clear, in Factors
// (djangoDevices), for SealFactors to seal and hash under the import's
// secret key; the others are skipped.
//
// Django's legacy fast hashes (sha1, md5, unsalted_sha1, unsalted_md5) are
// never kept as they are: each is wrapped in the default hash policy's hash
// of its digest (password.DjangoLegacy), what `user import` has, since it
// takes no hash flags.
func Parse(data []byte, now time.Time) (*Dump, error) {
	return ParsePolicy(data, now, password.DefaultHashPolicy())
}

// ParsePolicy is Parse wrapping the legacy fast hashes
// under policy. The wrapping costs one policy hash each, run on every core.
func ParsePolicy(data []byte, now time.Time, policy password.HashPolicy) (*Dump, error) {
	dump, err := Read(data, now)
	if err != nil {
		return nil, err
	}
	if err := dump.WrapLegacy(policy, nil); err != nil {
		return nil, err
	}
	return dump, nil
}

// Read is Parse leaving the legacy fast hashes as they
// are, to be wrapped by WrapLegacy for the users that will be written: a
// user whose stored hash is kept (import --update of an unchanged Django
// hash) is not worth a policy hash. Until then its users must not be
// written: a legacy form does not validate.
func Read(data []byte, now time.Time) (*Dump, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '[' {
		return nil, errors.New("not a dumpdata JSON array (run dumpdata with --format json, the default)")
	}
	var records []djangoRecord
	if err := json.Unmarshal(data, &records); err != nil {
		return nil, fmt.Errorf("not a dumpdata JSON array: %v", err)
	}
	var list []users.User
	var skipped []Skip
	var legacy []legacyHash
	refs := newDjangoUserRefs()
	ur := userReader{groupsByPK: djangoGroupsByPK(records), refs: refs, seen: make(map[string]string), now: now}
	for i, r := range records {
		if r.Model != "auth.user" {
			continue
		}
		u, old, skip := ur.read(i, r)
		if skip != nil {
			skipped = append(skipped, *skip)
			continue
		}
		if old != nil { // a legacy fast form, wrapped once it is known to be written (WrapLegacy)
			legacy = append(legacy, legacyHash{user: len(list), hash: old})
		}
		list = append(list, u)
	}
	tokens, tokenSkips := djangoTokens(records, list, refs, now)
	skipped = append(skipped, tokenSkips...)
	factors, deviceSkips := djangoDevices(records, refs)
	skipped = append(skipped, deviceSkips...)
	dumped := make([]string, len(list))
	for i, u := range list {
		dumped[i] = u.PasswordHash
	}
	return &Dump{Users: list, Tokens: tokens, Factors: factors, Skipped: skipped, dumped: dumped, legacy: legacy}, nil
}

// djangoGroupsByPK returns the names of the dump's auth.group records, by
// their pk's JSON text.
func djangoGroupsByPK(records []djangoRecord) map[string]string {
	groupsByPK := make(map[string]string)
	for _, r := range records {
		if r.Model != "auth.group" {
			continue
		}
		var g struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(r.Fields, &g) == nil && g.Name != "" {
			groupsByPK[string(bytes.TrimSpace(r.PK))] = g.Name
		}
	}
	return groupsByPK
}

// A userReader maps a dump's auth.user records to users, one at a time
// and in the dump's order (Parse says how).
type userReader struct {
	groupsByPK map[string]string // the dump's groups (djangoGroupsByPK)
	refs       *djangoUserRefs   // learns every record, imported or not
	seen       map[string]string // the record imported for each username, for messages
	now        time.Time         // every user's cut-off
}

// read maps the auth.user record r, the dump's record i: the user, with
// its legacy fast hash still to wrap (nil when its hash is kept as it
// is); or the record's skip.
func (ur *userReader) read(i int, r djangoRecord) (users.User, *password.DjangoLegacy, *Skip) {
	at := fmt.Sprintf("record %d (auth.user)", i)
	skip := func(reason string) (users.User, *password.DjangoLegacy, *Skip) {
		return users.User{}, nil, &Skip{"auth.user", at, reason}
	}
	var f djangoUser
	err := json.Unmarshal(r.Fields, &f)
	// Every record is known by its keys, imported or not: the keys and
	// devices of one left out are left out with it.
	ref := ur.refs.add(r.PK, f.Username, err == nil)
	if err != nil {
		return skip("fields: " + err.Error())
	}
	username := users.NormalizeUsername(f.Username)
	at = fmt.Sprintf("record %d (auth.user %q)", i, username)
	if username != f.Username {
		// Which of two names that NFKC folds together is which.
		at = fmt.Sprintf("record %d (auth.user %q, %q in NFKC)", i, f.Username, username)
	}
	if err := users.CheckUsername(username); err != nil {
		return skip(err.Error())
	}
	if first, dup := ur.seen[username]; dup {
		return skip("username: a second record for it, after " + first)
	}
	old, isLegacy, err := password.ParseDjangoLegacy(f.Password)
	usable := true
	if err == nil && !isLegacy {
		var hash *password.Hash
		hash, err = password.ParseHash(f.Password)
		usable = err == nil && hash.Usable()
	}
	if err != nil {
		return skip("password: " + err.Error())
	}
	groups, err := djangoGroups(f.Groups, ur.groupsByPK)
	if err != nil {
		return skip("groups: " + err.Error())
	}
	name := strings.TrimSpace(f.FirstName + " " + f.LastName)
	if err := users.CheckProfile(name, f.Email, groups); err != nil {
		return skip(err.Error())
	}
	ur.seen[username] = at
	ur.refs.imported(ref, username)
	active := f.IsActive == nil || *f.IsActive // Django's default
	u := users.User{Username: username, PasswordHash: f.Password, Name: name, Email: f.Email, Groups: groups,
		Admin: f.IsStaff || f.IsSuperuser, Disabled: !active || !usable, TokensAfter: ur.now}
	if !isLegacy {
		old = nil
	}
	return u, old, nil
}

// Fingerprint sets each user's DjangoHash to the fingerprint under key of
// the hash Django dumped.
func (d *Dump) Fingerprint(key secret.Key) {
	for i := range d.Users {
		d.Users[i].DjangoHash = users.DjangoHashFingerprint(key, d.dumped[i])
	}
}

// WrapLegacy wraps the legacy fast hash of each user named in which (nil:
// every user) in policy's hash of its digest.
func (d *Dump) WrapLegacy(policy password.HashPolicy, which map[string]bool) error {
	var todo []legacyHash
	for _, l := range d.legacy {
		if which == nil || which[d.Users[l.user].Username] {
			todo = append(todo, l)
		}
	}
	if err := wrapLegacy(d.Users, todo, policy); err != nil {
		return err
	}
	d.legacy = slices.DeleteFunc(d.legacy, func(l legacyHash) bool { return which == nil || which[d.Users[l.user].Username] })
	return nil
}

// djangoTokens returns the DRF keys of the dump's imported users, and
// moves each such user's cut-off back to its earliest key's creation.
// A key of a user the import leaves out is skipped with it (refs).
func djangoTokens(records []djangoRecord, list []users.User, refs *djangoUserRefs, now time.Time) ([]Token, []Skip) {
	index := make(map[string]int, len(list))
	for i, u := range list {
		index[u.Username] = i
	}
	var tokens []Token
	var skipped []Skip
	for i, r := range records {
		if r.Model != "authtoken.token" {
			continue
		}
		at := fmt.Sprintf("record %d (authtoken.token)", i)
		var f djangoToken
		if err := json.Unmarshal(r.Fields, &f); err != nil {
			skipped = append(skipped, Skip{"authtoken.token", at, "fields: " + err.Error()})
			continue
		}
		owner := refs.resolve(f.User)
		if owner.why != "" {
			skipped = append(skipped, Skip{"authtoken.token", at, owner.why})
			continue
		}
		username := owner.username
		at = fmt.Sprintf("record %d (authtoken.token of %q)", i, username)
		// The key is never quoted: it is a live token.
		var key string
		if json.Unmarshal(r.PK, &key) != nil || !isDRFKey(key) {
			skipped = append(skipped, Skip{"authtoken.token", at, "key: not 40 lowercase hex characters"})
			continue
		}
		created, err := parseDjangoTime(f.Created)
		if err != nil {
			skipped = append(skipped, Skip{"authtoken.token", at, "created: " + err.Error()})
			continue
		}
		if created.After(now) {
			created = now
		}
		tokens = append(tokens, Token{Key: key, Username: username, Created: created})
		if u := &list[index[username]]; created.Before(u.TokensAfter) {
			u.TokensAfter = created
		}
	}
	return tokens, skipped
}

// Factors are the second factors a user brings from django-otp. Its
// TOTP secret and recovery codes are live credentials: they must never
// reach a log line or an error, and are stored only sealed or hashed
// (SealFactors).
type Factors struct {
	// TOTP is the user's confirmed otp_totp.totpdevice, field for field
	// (mfa.TOTP); nil for none.
	TOTP *mfa.TOTP
	// RecoveryCodes are the otp_static.statictoken tokens of the user's
	// confirmed static devices, in their normal form
	// (mfa.NormalizeRecoveryCode).
	RecoveryCodes []string
	// StaticDevices counts the static devices RecoveryCodes came from: the
	// import counts factors per device.
	StaticDevices int
}

// Devices counts the django-otp devices f came from; none for nil.
func (f *Factors) Devices() int {
	if f == nil {
		return 0
	}
	n := f.StaticDevices
	if f.TOTP != nil {
		n++
	}
	return n
}

// The models of django-otp's records, as dumpdata names them.
const (
	totpDeviceModel   = "otp_totp.totpdevice"
	staticDeviceModel = "otp_static.staticdevice"
	staticTokenModel  = "otp_static.statictoken"
)

// maxRecoveryCodes is the most recovery codes a user may keep, as
// users.CheckFactors allows them (TestMaxRecoveryCodes keeps the two in
// step).
const maxRecoveryCodes = 20

// djangoTOTPDevice is the fields of an otp_totp.totpdevice record that
// authsvc maps; tolerance is not among them (mfa.TOTP).
type djangoTOTPDevice struct {
	User      json.RawMessage `json:"user"`
	Confirmed bool            `json:"confirmed"`
	Key       string          `json:"key"`
	Step      int64           `json:"step"`
	T0        int64           `json:"t0"`
	Digits    int             `json:"digits"`
	Drift     int64           `json:"drift"`
	LastT     int64           `json:"last_t"`
}

// A djangoDeviceSkip is a skip of a django-otp record, with the record's
// index, so that the skips can be reported in the dump's order.
type djangoDeviceSkip struct {
	record int
	skip   Skip
}

// djangoDevices maps the django-otp records of the dump's imported users
// (API.md "Second factors"): a confirmed TOTP device becomes the user's
// authenticator, with its key, step, t0, digits, drift and last_t; the
// tokens of a confirmed static device become recovery codes. Unconfirmed
// devices, devices of users the import leaves out, and devices or tokens
// that cannot be mapped are skipped, one skip each, in the dump's order.
// The dump's order is not relied on otherwise: dumpdata writes the static
// tokens before the device they point to.
func djangoDevices(records []djangoRecord, refs *djangoUserRefs) (map[string]*Factors, []Skip) {
	dr := &deviceReader{records: records, refs: refs, factors: make(map[string]*Factors)}
	dr.totpDevices()
	dr.staticDevices()
	for name, f := range dr.factors {
		if f.Devices() == 0 {
			delete(dr.factors, name)
		}
	}
	slices.SortStableFunc(dr.skips, func(a, b djangoDeviceSkip) int { return a.record - b.record })
	out := make([]Skip, len(dr.skips))
	for i, s := range dr.skips {
		out[i] = s.skip
	}
	return dr.factors, out
}

// A deviceReader maps a dump's django-otp records to the factors of the
// users they belong to (djangoDevices).
type deviceReader struct {
	records []djangoRecord
	refs    *djangoUserRefs
	factors map[string]*Factors // by username
	skips   []djangoDeviceSkip
}

// skip skips the record i, of model, of the user named username ("" when
// that is not known), for reason.
func (dr *deviceReader) skip(i int, model, username, reason string) {
	at := fmt.Sprintf("record %d (%s of %q)", i, model, username)
	if username == "" {
		at = fmt.Sprintf("record %d (%s)", i, model)
	}
	dr.skips = append(dr.skips, djangoDeviceSkip{i, Skip{"second factor", at, reason}})
}

// of returns the factors of the user named username, new ones when it has
// none yet.
func (dr *deviceReader) of(username string) *Factors {
	f := dr.factors[username]
	if f == nil {
		f = &Factors{}
		dr.factors[username] = f
	}
	return f
}

// totpDevices maps the TOTP devices: each confirmed, usable one is a
// candidate of its user, and the one of the lowest pk is kept.
func (dr *deviceReader) totpDevices() {
	type candidate struct {
		record int
		pk     json.RawMessage
		totp   mfa.TOTP
	}
	candidates := make(map[string][]candidate)
	for i, r := range dr.records {
		if r.Model != totpDeviceModel {
			continue
		}
		// django-otp's defaults, for a field the record leaves out.
		f := djangoTOTPDevice{Step: 30, Digits: 6, LastT: -1}
		err := json.Unmarshal(r.Fields, &f)
		owner := dr.refs.resolve(f.User)
		username := owner.username
		if why := deviceUnusable(err, owner, f.Confirmed); why != "" {
			dr.skip(i, r.Model, owner.named, why)
			continue
		}
		key, err := hex.DecodeString(f.Key)
		if err != nil { // never quoted: the key is the secret
			dr.skip(i, r.Model, username, "key: not hex")
			continue
		}
		t := mfa.TOTP{Secret: key, Step: f.Step, T0: f.T0, Digits: f.Digits, Drift: f.Drift, LastT: f.LastT}
		if err := t.Validate(); err != nil {
			dr.skip(i, r.Model, username, err.Error())
			continue
		}
		candidates[username] = append(candidates[username], candidate{i, r.PK, t})
	}
	for username, list := range candidates {
		// authsvc keeps one authenticator per user; django-otp accepts a
		// code of any confirmed device. The one kept is the first device
		// the user enrolled, the lowest pk: the one django-otp tries first
		// (its devices come in the database's order, by pk), and most
		// likely the one the user's app still holds. The others are
		// reported, so the operator can tell their users.
		slices.SortStableFunc(list, func(a, b candidate) int { return comparePK(a.pk, b.pk) })
		dr.of(username).TOTP = &list[0].totp
		for _, c := range list[1:] {
			dr.skip(c.record, totpDeviceModel, username, fmt.Sprintf("another confirmed TOTP device of the user: authsvc keeps one authenticator, the one of the lowest pk (record %d)", list[0].record))
		}
	}
}

// staticDevices maps the static devices: the tokens of each confirmed one
// become its user's recovery codes. Tokens go with their device, imported
// or not; a token of no device in the dump is skipped.
func (dr *deviceReader) staticDevices() {
	tokensOf, staticPKs := dr.staticTokens()
	for i, r := range dr.records {
		if r.Model != staticDeviceModel {
			continue
		}
		var f struct {
			User      json.RawMessage `json:"user"`
			Confirmed bool            `json:"confirmed"`
		}
		err := json.Unmarshal(r.Fields, &f)
		owner := dr.refs.resolve(f.User)
		username := owner.username
		pk := string(bytes.TrimSpace(r.PK))
		tokens := tokensOf[pk]
		delete(tokensOf, pk) // its tokens go with the device, imported or not
		why := deviceUnusable(err, owner, f.Confirmed)
		if why == "" && staticPKs[pk] > 1 {
			// Whose device its tokens are is not known.
			why = "its pk is on more than one static device of the dump"
		}
		if why != "" {
			dr.skip(i, r.Model, owner.named, why)
			continue
		}
		codes := dr.recoveryCodes(username, tokens)
		x := dr.of(username)
		if len(x.RecoveryCodes)+len(codes) > maxRecoveryCodes {
			dr.skip(i, r.Model, username, fmt.Sprintf("%d tokens: with the user's other static devices, more than the %d recovery codes a user may keep", len(codes), maxRecoveryCodes))
			continue
		}
		x.RecoveryCodes = append(x.RecoveryCodes, codes...)
		x.StaticDevices++
	}
	for _, list := range tokensOf { // tokens of no static device in the dump
		for _, t := range list {
			dr.skip(t, staticTokenModel, "", "its device is not in the dump")
		}
	}
}

// staticTokens returns the static tokens' records by the pk of the device
// they point to, skipping those that cannot be read, and how many static
// devices the dump holds of each pk. The dump's order is not relied on:
// dumpdata writes the tokens before their device.
func (dr *deviceReader) staticTokens() (tokensOf map[string][]int, staticPKs map[string]int) {
	tokensOf = make(map[string][]int) // record indexes
	staticPKs = make(map[string]int)
	for i, r := range dr.records {
		switch r.Model {
		case staticDeviceModel:
			staticPKs[string(bytes.TrimSpace(r.PK))]++
		case staticTokenModel:
			var f struct {
				Device json.RawMessage `json:"device"`
			}
			if err := json.Unmarshal(r.Fields, &f); err != nil {
				dr.skip(i, r.Model, "", "fields: "+err.Error())
				continue
			}
			pk := string(bytes.TrimSpace(f.Device))
			tokensOf[pk] = append(tokensOf[pk], i)
		}
	}
	return tokensOf, staticPKs
}

// recoveryCodes returns the codes of the static tokens of username's
// device, the records tokens, in their normal form; a token that is not a
// recovery code is skipped.
func (dr *deviceReader) recoveryCodes(username string, tokens []int) []string {
	var codes []string
	for _, t := range tokens {
		var tf struct {
			Token string `json:"token"`
		}
		err := json.Unmarshal(dr.records[t].Fields, &tf)
		code, ok := mfa.NormalizeRecoveryCode(tf.Token)
		if err != nil || !ok { // never quoted: the token is a live code
			dr.skip(t, staticTokenModel, username, "token: not 8 to 16 letters and digits, which a recovery code is")
			continue
		}
		codes = append(codes, code)
	}
	return codes
}

// comparePK orders two records' primary keys: as integers when both are
// (Django's default AutoField), else as their JSON text.
func comparePK(a, b json.RawMessage) int {
	var x, y int64
	if json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil {
		return cmp.Compare(x, y)
	}
	return bytes.Compare(bytes.TrimSpace(a), bytes.TrimSpace(b))
}

// djangoUserRefs resolves the user a DRF key or a django-otp device names
// (its user field) to the user imported from that record, as Django
// resolves it: a natural key (["name"]) names the auth.user record whose
// username is that name exactly, as dumped, before NFKC; a primary key
// names the record of that pk. A key is never normalised first: NFKC folds
// distinct Django users into one name (mallory and a fullwidth ｍallory),
// of which the import keeps one record at most, and a normalised key would
// give the keys and devices of the one left out to the one kept.
type djangoUserRefs struct {
	usernames []string         // by record, in the dump's order: its username imported, "" for a record left out
	display   []string         // by record: its username as dumped, for messages
	byName    map[string][]int // the records of each username as dumped
	byPK      map[string][]int // the records of each pk, as its JSON text
}

func newDjangoUserRefs() *djangoUserRefs {
	return &djangoUserRefs{byName: make(map[string][]int), byPK: make(map[string][]int)}
}

// add registers an auth.user record of primary key pk and, when hasName,
// username as dumped; it is left out until imported says otherwise. It
// returns the record's number for imported.
func (r *djangoUserRefs) add(pk json.RawMessage, username string, hasName bool) int {
	n := len(r.usernames)
	r.usernames = append(r.usernames, "")
	r.display = append(r.display, username)
	r.byPK[string(bytes.TrimSpace(pk))] = append(r.byPK[string(bytes.TrimSpace(pk))], n)
	if hasName {
		r.byName[username] = append(r.byName[username], n)
	}
	return n
}

// imported records that record n is imported, as username.
func (r *djangoUserRefs) imported(n int, username string) { r.usernames[n] = username }

// A djangoOwner is the user a record's user field names.
type djangoOwner struct {
	username string // the user imported; "" when why is not
	named    string // the user as the field names it, for messages; "" when it is not known
	why      string // why the record is left out with its user; "" when it is not
}

// resolve returns the user a record's user field names. A key that names
// no record of the dump, or more than one, or a record left out, is
// reported (why) and none of its records is given to anyone.
func (r *djangoUserRefs) resolve(raw json.RawMessage) djangoOwner {
	var natural []string
	var list []int
	var named string
	if json.Unmarshal(raw, &natural) == nil && len(natural) == 1 {
		named, list = natural[0], r.byName[natural[0]]
	} else {
		list = r.byPK[string(bytes.TrimSpace(raw))]
	}
	switch {
	case len(list) == 0:
		return djangoOwner{named: named, why: "its user is not in the dump"}
	case len(list) > 1:
		return djangoOwner{named: named, why: "its user field names more than one auth.user record of the dump"}
	}
	n := list[0]
	if named == "" {
		named = r.display[n]
	}
	if r.usernames[n] == "" {
		return djangoOwner{named: named, why: "its user is not imported"}
	}
	return djangoOwner{username: r.usernames[n], named: r.usernames[n]}
}

// isDRFKey reports whether key has the form of DRF's keys, 20 random bytes
// in lowercase hex, which is also authsvc's token form.
func isDRFKey(key string) bool {
	if len(key) != 40 {
		return false
	}
	for i := range len(key) {
		if c := key[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// parseDjangoTime parses a datetime as Django's serializer writes it:
// ISO 8601, "Z" or an offset when time zones are on, none when they are
// off (then taken as UTC).
func parseDjangoTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	t, err := time.Parse("2006-01-02T15:04:05.999999999", s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not an ISO 8601 datetime", s)
	}
	return t, nil
}

// A legacyHash is a user's legacy fast hash, still to be wrapped.
type legacyHash struct {
	user int // index in the users
	hash *password.DjangoLegacy
}

// wrapLegacy sets each legacy user's hash to its wrapping under policy, on
// as many goroutines as there are cores: a policy hash is tens of
// milliseconds, and an old project may hold many legacy hashes.
func wrapLegacy(list []users.User, legacy []legacyHash, policy password.HashPolicy) error {
	jobs := make(chan legacyHash)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(legacy)) {
		wg.Go(func() {
			for j := range jobs {
				wrapped, err := j.hash.Wrap(policy)
				if err != nil {
					select {
					case errs <- fmt.Errorf("wrapping a legacy Django hash: %w", err):
					default:
					}
					continue
				}
				list[j.user].PasswordHash = wrapped
			}
		})
	}
	for _, j := range legacy {
		jobs <- j
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// djangoGroups returns the group names of a user record's groups: natural
// keys (["name"]) or primary keys of the dump's auth.group records.
func djangoGroups(raw json.RawMessage, byPK map[string]string) ([]string, error) {
	groups := []string{}
	if len(raw) == 0 || string(raw) == "null" {
		return groups, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, errors.New("not a list")
	}
	for _, item := range items {
		var natural []string
		if json.Unmarshal(item, &natural) == nil && len(natural) == 1 {
			groups = append(groups, natural[0])
			continue
		}
		name, ok := byPK[string(bytes.TrimSpace(item))]
		if !ok {
			return nil, fmt.Errorf("%s is neither a natural key nor a group in the dump (use dumpdata auth.user auth.group --natural-foreign)", item)
		}
		groups = append(groups, name)
	}
	return groups, nil
}

// deviceUnusable returns why a django-otp device record is skipped before
// its own fields are looked at (its fields did not decode, its user is not
// imported, it was never confirmed), or "" when none of these holds.
func deviceUnusable(decodeErr error, owner djangoOwner, confirmed bool) string {
	switch {
	case decodeErr != nil:
		return "fields: " + decodeErr.Error()
	case owner.why != "":
		return owner.why
	case !confirmed:
		return "an unconfirmed device"
	}
	return ""
}
