-- wrk script for make bench: every request is a login of $BENCH_USER with
-- $BENCH_PASSWORD (a generated alphanumeric password: no JSON escaping needed).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = string.format('{"username":"%s","password":"%s"}',
	os.getenv("BENCH_USER") or "bench", os.getenv("BENCH_PASSWORD") or "")
