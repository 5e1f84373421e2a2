package testservers

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// RESP sends one command to the Redis (or sentinel) at addr and returns
// its reply: a string for a simple or bulk string, an int64, nil, or a
// []any; an error reply is an error. It speaks RESP2 itself, as
// waitForRedis does, so that tests need no go-redis client to drive the
// servers around the one under test.
func RESP(addr string, args ...string) (any, error) {
	c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return nil, err
	}
	return readRESP(bufio.NewReader(c))
}

// readRESP reads one RESP2 reply.
func readRESP(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty RESP line")
	}
	switch body := line[1:]; line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, fmt.Errorf("redis error reply: %s", body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err // $-1: nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err // *-1: nil
		}
		list := make([]any, n)
		for i := range list {
			if list[i], err = readRESP(r); err != nil {
				return nil, err
			}
		}
		return list, nil
	}
	return nil, fmt.Errorf("unknown RESP reply %q", line)
}

// asList returns reply as a list, or nil if it is none.
func asList(reply any) []any {
	l, _ := reply.([]any)
	return l
}

// pairs reads a flat key, value, key, value … list, as SENTINEL REPLICAS
// gives each replica.
func pairs(reply any) map[string]string {
	m := map[string]string{}
	l := asList(reply)
	for i := 0; i+1 < len(l); i += 2 {
		k, _ := l[i].(string)
		v, _ := l[i+1].(string)
		m[k] = v
	}
	return m
}

// pingRESP sends PING to addr and expects +PONG, or -NOAUTH from a Redis
// that wants a password.
func pingRESP(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 7)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != "+PONG\r\n" && string(buf) != "-NOAUTH" { // a Redis with a password answers too
		return fmt.Errorf("PING answered %q", buf)
	}
	return nil
}
