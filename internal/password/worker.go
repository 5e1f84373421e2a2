package password

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"time"
)

// WorkerCommand is the hidden subcommand the hasher pool starts its
// worker processes with (pool.go): "authsvc hash-worker" checks the
// passwords framed on its stdin and answers one byte each on stdout.
const WorkerCommand = "hash-worker"

// Bounds on a job frame: a password is at most MaxLen bytes (the
// login body's rule) and a hash's salt or digest far less than a KiB.
const (
	maxJobField = 4 << 10
	maxJobFrame = 16 << 10
)

// The worker's answers.
const (
	jobMatch    = '1'
	jobMismatch = '0'
)

// appendHashJob appends to b the frame that asks a worker to check
// password against h: a uvarint length, then h's scheme, parameters, the
// scheme inside a wrapped form and its legacy salt, salt and digest, then
// the password. The frame holds the password: callers clear it once
// written.
func appendHashJob(b []byte, h *Hash, password []byte) []byte {
	var body []byte
	body = appendField(body, []byte(h.kind))
	body = appendField(body, h.bcrypt)
	for _, n := range []uint64{uint64(h.Cost), uint64(h.MemoryKiB), uint64(h.Time), uint64(h.Threads), uint64(h.Iterations),
		uint64(h.ScryptN), uint64(h.ScryptR), uint64(h.ScryptP)} {
		body = binary.AppendUvarint(body, n)
	}
	body = appendField(body, []byte(h.inner))
	body = appendField(body, h.legacySalt)
	body = appendField(body, h.salt)
	body = appendField(body, h.digest)
	body = appendField(body, password)
	b = binary.AppendUvarint(b, uint64(len(body)))
	b = append(b, body...)
	clear(body)
	return b
}

func appendField(b, field []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(field))), field...)
}

// errBadJob is any frame decodeHashJob refuses; it never quotes the frame.
var errBadJob = errors.New("malformed hash job")

// decodeHashJob decodes a frame's body (appendHashJob, without the length)
// into the hash and the password, and checks the hash against the same
// bounds a users file's hashes are held to, so that no frame can make the
// worker allocate or loop beyond what a stored hash could.
func decodeHashJob(body []byte) (*Hash, []byte, error) {
	d := jobDecoder{rest: body}
	h := &Hash{kind: string(d.field())}
	h.bcrypt = d.field()
	cost, m, t, p, iterations := d.number(), d.number(), d.number(), d.number(), d.number()
	scryptN, scryptR, scryptP := d.number(), d.number(), d.number()
	h.inner = string(d.field())
	h.legacySalt = d.field()
	h.salt = d.field()
	h.digest = d.field()
	password := d.field()
	if d.err != nil || len(d.rest) != 0 {
		return nil, nil, errBadJob
	}
	if cost > MaxBcryptCost || m > maxArgon2MemoryKiB || t > maxArgon2Time || p > maxArgon2Threads || iterations > maxPBKDF2Iterations ||
		scryptN > maxScryptWork || scryptR > maxScryptWork || scryptP > maxScryptWork {
		return nil, nil, errBadJob
	}
	h.Cost, h.MemoryKiB, h.Time, h.Threads, h.Iterations = int(cost), uint32(m), uint32(t), uint8(p), int(iterations)
	h.ScryptN, h.ScryptR, h.ScryptP = int(scryptN), int(scryptR), int(scryptP)
	if err := h.checkBounds(); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errBadJob, err)
	}
	return h, password, nil
}

// checkBounds returns why h's parameters are outside what ParseHash
// accepts for its scheme, or nil.
func (h *Hash) checkBounds() error {
	if salted, wrapped := wrappedSalted(h.kind); wrapped {
		if h.inner != SchemeBcrypt && h.inner != SchemeArgon2id {
			return errors.New("wrapped scheme is not bcrypt or argon2id")
		}
		if salted != (len(h.legacySalt) > 0) || len(h.legacySalt) > maxDjangoSaltLen {
			return errors.New("legacy salt out of range")
		}
	} else if h.inner != "" || len(h.legacySalt) != 0 {
		return errors.New("a wrapped scheme's fields on another scheme")
	}
	switch h.costKind() {
	case SchemeBcrypt, SchemeDjangoBcrypt, SchemeBcryptSHA256:
		return checkBcryptCost(h.Cost)
	case SchemeArgon2id, SchemeDjangoArgon2, SchemeDjangoArgon2i:
		if err := checkArgon2Params(h.MemoryKiB, h.Time, uint32(h.Threads)); err != nil {
			return err
		}
		if len(h.salt) < minArgon2SaltLen || len(h.salt) > maxArgon2SaltLen || len(h.digest) < minArgon2KeyLen || len(h.digest) > maxArgon2KeyLen {
			return errors.New("argon2 salt or digest length out of range")
		}
	case SchemePBKDF2, SchemePBKDF2SHA1:
		if maxIterations, _ := pbkdf2Bounds(h.kind); h.Iterations < minPBKDF2Iterations || h.Iterations > maxIterations || len(h.salt) > maxPBKDF2SaltLen {
			return errors.New("pbkdf2 iterations or salt out of range")
		}
	case SchemeScrypt:
		if err := checkScryptParams(uint64(h.ScryptN), uint64(h.ScryptR), uint64(h.ScryptP)); err != nil {
			return err
		}
		if len(h.salt) > maxDjangoSaltLen {
			return errors.New("scrypt salt out of range")
		}
	case SchemeUnusable:
	default:
		return errors.New("unknown scheme")
	}
	return nil
}

// A jobDecoder reads a frame's fields in order; the first error sticks.
type jobDecoder struct {
	rest []byte
	err  error
}

func (d *jobDecoder) number() uint64 {
	if d.err != nil {
		return 0
	}
	n, size := binary.Uvarint(d.rest)
	if size <= 0 {
		d.err = errBadJob
		return 0
	}
	d.rest = d.rest[size:]
	return n
}

func (d *jobDecoder) field() []byte {
	n := d.number()
	if d.err != nil {
		return nil
	}
	if n > maxJobField || n > uint64(len(d.rest)) {
		d.err = errBadJob
		return nil
	}
	f := d.rest[:n:n]
	d.rest = d.rest[n:]
	return f
}

// A worker that has waited releaseAfter for its next job returns its free
// memory to the operating system (releaseMemory). An argon2id check at the
// default policy allocates 19 MiB, and the collector lets the heap grow to
// twice what was live, so a worker holds about 45 MB after a burst, and
// Go's scavenger gives it back only minutes later. The price is one check
// that faults its memory in again, a few ms, after a pause; under load the
// next job comes sooner and nothing is released. Variables for the tests.
var (
	releaseAfter  = time.Second
	releaseMemory = debug.FreeOSMemory
)

// RunWorker is the hash-worker command: it checks each job framed on
// stdin and writes its answer to stdout, until stdin ends (the server has
// closed the pipe or died). A malformed frame ends it with an error that
// quotes nothing; the server then checks in its own process.
func RunWorker(stdin io.Reader, stdout io.Writer) error {
	in := byteReader{r: stdin} // unbuffered: the frame buffer below is the only copy of a password
	frame := make([]byte, maxJobFrame)
	release := time.AfterFunc(releaseAfter, releaseMemory)
	defer release.Stop()
	for {
		n, err := binary.ReadUvarint(in)
		release.Stop()
		switch {
		case err == io.EOF:
			return nil
		case err != nil:
			return fmt.Errorf("%s: %w", WorkerCommand, errBadJob)
		case n > maxJobFrame:
			return fmt.Errorf("%s: %w: frame too long", WorkerCommand, errBadJob)
		}
		body := frame[:n]
		if _, err := io.ReadFull(stdin, body); err != nil {
			return fmt.Errorf("%s: %w: frame cut short", WorkerCommand, errBadJob)
		}
		h, password, err := decodeHashJob(body)
		if err != nil {
			return fmt.Errorf("%s: %w", WorkerCommand, err)
		}
		answer := byte(jobMismatch)
		if h.Verify(password) {
			answer = jobMatch
		}
		clear(body)
		if _, err := stdout.Write([]byte{answer}); err != nil {
			return err
		}
		release.Reset(releaseAfter)
	}
}

// byteReader reads one byte at a time from r, for a frame's length.
type byteReader struct{ r io.Reader }

func (b byteReader) ReadByte() (byte, error) {
	var c [1]byte
	_, err := io.ReadFull(b.r, c[:])
	return c[0], err
}
