-- wrk script for make bench: every request is a login of $BENCH_USER with
-- $BENCH_PASSWORD (a generated alphanumeric password: no JSON escaping needed).
-- At the end it prints one line "status CODE COUNT" per reply status, so that
-- the driver can tell throttled (429) from refused at capacity (503).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = string.format('{"username":"%s","password":"%s"}',
	os.getenv("BENCH_USER") or "bench", os.getenv("BENCH_PASSWORD") or "")

local threads = {}

function setup(thread)
	table.insert(threads, thread)
end

function init(args)
	statuses = {}
end

function response(status, headers, body)
	statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
	local total = {}
	for _, thread in ipairs(threads) do
		for code, n in pairs(thread:get("statuses")) do
			total[code] = (total[code] or 0) + n
		end
	end
	for code, n in pairs(total) do
		io.write(string.format("status %d %d\n", code, n))
	end
end
