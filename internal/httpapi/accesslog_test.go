package httpapi

import (
	"bytes"
	"net/http/httptest"
	"testing"
	"time"
)

// accessLineBoth writes one access line through the fast path and through
// slog's handler of the same format, and returns both.
func accessLineBoth(format, method, path string, status int, d time.Duration, client, id string, end time.Time) (fast, viaSlog string) {
	req := httptest.NewRequest(method, "http://example.com/", nil)
	req.URL.Path = path
	req.RemoteAddr = client
	rec := &statusRecorder{status: status}
	rec.id[0] = id

	var direct, generic bytes.Buffer
	newAccessLog(NewLogger(format, &direct), format, &direct).write(req, rec, end, d)
	newAccessLog(NewLogger(format, &generic), format, nil).write(req, rec, end, d)
	return direct.String(), generic.String()
}

// TestAccessLineAsSlog: the hand-formatted line is byte for byte what
// slog's handler writes, in both formats.
func TestAccessLineAsSlog(t *testing.T) {
	berlin := time.FixedZone("CET", 3600)
	for _, tc := range []struct {
		method, path, client, id string
		status                   int
		d                        time.Duration
		end                      time.Time
	}{
		{"GET", "/api/auth/info", "127.0.0.1:51234", "6f1c0e9a2b3d-1", 200, 312500 * time.Nanosecond, time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)},
		{"POST", "/api/auth/login/", "[2001:db8::1]:443", "req.from_proxy-7", 401, 250 * time.Millisecond, time.Date(2026, 1, 2, 3, 4, 5, 999_999_999, time.UTC)},
		{"DELETE", "/api/auth/sessions/abc", "10.0.0.1:1", "x", 204, 0, time.Date(2026, 6, 30, 23, 59, 59, 100_000_000, berlin)},
		{"GET", "/api/auth/info/", "127.0.0.1:2", "id", 503, 3*time.Second + 7, time.Date(2026, 11, 23, 10, 0, 0, 1_000, time.Local)},
		{"HEAD", "/%41~!$&'()*+,;:@", "127.0.0.1:3", "A-Z_a.z", 404, 999, time.Now()},
	} {
		for _, format := range []string{"text", "json"} {
			fast, viaSlog := accessLineBoth(format, tc.method, tc.path, tc.status, tc.d, tc.client, tc.id, tc.end)
			if fast != viaSlog {
				t.Errorf("%s access line for %s %s:\n got %q\nwant %q", format, tc.method, tc.path, fast, viaSlog)
			}
		}
	}
}

// TestAccessLineSameSecond: lines of one second share its formatted part,
// whatever their fraction or time zone.
func TestAccessLineSameSecond(t *testing.T) {
	sec := time.Date(2026, 11, 23, 10, 0, 7, 0, time.UTC)
	for _, format := range []string{"text", "json"} {
		var direct, generic bytes.Buffer
		fast := newAccessLog(NewLogger(format, &direct), format, &direct)
		slow := newAccessLog(NewLogger(format, &generic), format, nil)
		for _, end := range []time.Time{sec, sec.Add(120 * time.Millisecond), sec.Add(999_999_999), sec.In(time.FixedZone("X", -5*3600)), sec.Add(time.Second), sec.Add(10), sec.AddDate(8000, 0, 0)} {
			req := httptest.NewRequest("GET", "/api/auth/info", nil)
			rec := &statusRecorder{status: 200}
			rec.id[0] = "id"
			fast.write(req, rec, end, time.Millisecond)
			slow.write(req, rec, end, time.Millisecond)
		}
		if direct.String() != generic.String() {
			t.Errorf("%s lines:\n got %s\nwant %s", format, direct.String(), generic.String())
		}
	}
}

// TestAccessLineNotPlain: values slog would quote or escape go through
// slog itself.
func TestAccessLineNotPlain(t *testing.T) {
	end := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	for _, path := range []string{"/a b", `/a"b`, `/a\b`, "/a=b", "/zoë", "/\x00", ""} {
		for _, format := range []string{"text", "json"} {
			fast, viaSlog := accessLineBoth(format, "GET", path, 404, time.Millisecond, "127.0.0.1:1", "id", end)
			if fast != viaSlog {
				t.Errorf("%s access line for path %q:\n got %q\nwant %q", format, path, fast, viaSlog)
			}
		}
	}
	if plainLogValue("/a b") || plainLogValue("") || !plainLogValue("/api/auth/info") {
		t.Errorf("plainLogValue misjudges a space, an empty string or a plain path")
	}
}

func FuzzAccessLine(f *testing.F) {
	f.Add("/api/auth/info", "127.0.0.1:1", "id-1", int64(312500), int64(1_763_892_000_123_456_789))
	f.Fuzz(func(t *testing.T, path, client, id string, d, unixNano int64) {
		end := time.Unix(0, unixNano).UTC()
		if y := end.Year(); y < 0 || y >= 10000 {
			return // slog refuses such times; no request ends then
		}
		for _, format := range []string{"text", "json"} {
			fast, viaSlog := accessLineBoth(format, "GET", path, 200, time.Duration(d), client, id, end)
			if fast != viaSlog {
				t.Errorf("%s access line:\n got %q\nwant %q", format, fast, viaSlog)
			}
		}
	})
}
