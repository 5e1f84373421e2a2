package httpapi

import (
	"net/http"
	"net/netip"
	"strings"
)

// ClientIP returns the address of the client behind r: the connection's
// peer, unless that peer is a trusted proxy; then the right-most
// X-Forwarded-For address that is not a trusted proxy. Entries left of it
// are the client's to forge, so they are never read. An unparsable entry
// stops the walk at the last trusted hop.
func ClientIP(r *http.Request, trusted []netip.Prefix) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	ip := ap.Addr().Unmap()
	if !isTrusted(ip, trusted) {
		return ip
	}
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		entries := strings.Split(hops[i], ",")
		for j := len(entries) - 1; j >= 0; j-- {
			hop, ok := parseHop(strings.TrimSpace(entries[j]))
			if !ok {
				return ip
			}
			ip = hop.Unmap()
			if !isTrusted(ip, trusted) {
				return ip
			}
		}
	}
	return ip
}

// isTrusted reports whether ip is in one of the trusted prefixes.
func isTrusted(ip netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// parseHop parses one X-Forwarded-For entry: an address, or, as some load
// balancers send it, an address with a port ("192.0.2.1:4711",
// "[2001:db8::1]:4711"); the port is dropped.
func parseHop(s string) (netip.Addr, bool) {
	if ip, err := netip.ParseAddr(s); err == nil {
		return ip, true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr(), true
	}
	return netip.Addr{}, false
}
