package httpapi

import (
	"net/http"
	"net/netip"
	"testing"
)

func TestClientIP(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"), netip.MustParsePrefix("2001:db8::/32")}
	tests := []struct {
		name    string
		remote  string
		xff     []string
		trusted []netip.Prefix
		want    string
	}{
		{"no proxy configured: XFF ignored", "198.51.100.1:4000", []string{"203.0.113.9"}, nil, "198.51.100.1"},
		{"untrusted peer: XFF ignored", "198.51.100.1:4000", []string{"203.0.113.9"}, trusted, "198.51.100.1"},
		{"trusted peer: last XFF hop", "10.1.2.3:4000", []string{"203.0.113.9"}, trusted, "203.0.113.9"},
		{"forged left entries skipped", "10.1.2.3:4000", []string{"1.1.1.1, 203.0.113.9"}, trusted, "203.0.113.9"},
		{"chain of trusted proxies", "10.1.2.3:4000", []string{"203.0.113.9, 192.0.2.7, 10.9.9.9"}, trusted, "203.0.113.9"},
		{"several XFF headers", "10.1.2.3:4000", []string{"1.1.1.1, 203.0.113.9", "10.0.0.2"}, trusted, "203.0.113.9"},
		{"garbage hop stops at last trusted", "10.1.2.3:4000", []string{"203.0.113.9, bogus"}, trusted, "10.1.2.3"},
		{"all hops trusted", "10.1.2.3:4000", []string{"10.0.0.1"}, trusted, "10.0.0.1"},
		{"trusted peer, no XFF", "10.1.2.3:4000", nil, trusted, "10.1.2.3"},
		{"IPv6 proxy", "[2001:db8::1]:443", []string{"2001:db9::5"}, trusted, "2001:db9::5"},
		{"mapped IPv4 peer", "[::ffff:10.1.2.3]:80", []string{"203.0.113.9"}, trusted, "203.0.113.9"},
		{"hop with a port", "10.1.2.3:4000", []string{"203.0.113.9:51234"}, trusted, "203.0.113.9"},
		{"IPv6 hop with a port", "10.1.2.3:4000", []string{"[2001:db9::5]:443"}, trusted, "2001:db9::5"},
		{"trusted hop with a port, then the client", "10.1.2.3:4000", []string{"203.0.113.9:1, 10.0.0.2:8080"}, trusted, "203.0.113.9"},
		{"bracketed IPv6 without a port is garbage", "10.1.2.3:4000", []string{"[2001:db9::5]"}, trusted, "10.1.2.3"},
	}
	for _, tt := range tests {
		r := &http.Request{RemoteAddr: tt.remote, Header: http.Header{}}
		for _, v := range tt.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := ClientIP(r, tt.trusted).String(); got != tt.want {
			t.Errorf("%s: ClientIP(%s, XFF %q) = %s; want %s", tt.name, tt.remote, tt.xff, got, tt.want)
		}
	}
}
