#!/usr/bin/env bash
# make bench: build authsvc and the baseline, start them (and Redis, and the
# in-process servers of bench_test.go) on free loopback ports, let
# bench/driver measure them side by side, print one table (also saved to
# bench/out/latest.txt), and stop every process started here, whatever happens.
# Knobs (environment): GO, BENCH_COST (bcrypt cost, default 12), BENCH_ARGS
# (extra driver flags, e.g. "-info-rounds 3"; see go run ./bench/driver -h).
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
COST=${BENCH_COST:-12}
OUT=bench/out
mkdir -p "$OUT"

say() { printf 'bench: %s\n' "$*" >&2; }

# --- every process started here is stopped on exit ---------------------------
pids=()
cleanup() {
	local pid alive
	set +e
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
	for _ in $(seq 100); do
		alive=0
		for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
		[ "$alive" = 0 ] && break
		sleep 0.1
	done
	for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
	wait 2>/dev/null
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- tools ---------------------------------------------------------------------
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
need=()
command -v wrk >/dev/null 2>&1 || need+=(wrk)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v curl >/dev/null 2>&1 || need+=(curl)
if [ "${#need[@]}" -gt 0 ]; then
	say "installing ${need[*]} (apt-get)"
	$sudo apt-get update -qq
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null ||
		say "apt-get install ${need[*]} failed"
fi
command -v wrk >/dev/null 2>&1 || { say "wrk is required"; exit 1; }
command -v curl >/dev/null 2>&1 || { say "curl is required"; exit 1; }

# --- build -----------------------------------------------------------------------
say "building authsvc, the baseline, bcryptrate, the driver and authsvc's test binary"
"$GO" build -o "$OUT/authsvc" .
"$GO" build -o "$OUT/baseline" ./bench/baseline
"$GO" build -o "$OUT/bcryptrate" ./bench/bcryptrate
"$GO" build -o "$OUT/driver" ./bench/driver
"$GO" test -c -o "$OUT/authsvc.test" .

# --- helpers -------------------------------------------------------------------
# free_port prints a loopback port nothing listens on.
free_port() {
	local p
	for _ in $(seq 200); do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	say "no free port found"
	return 1
}

# wait_http URL PID: wait until URL answers 200, while PID lives.
wait_http() {
	for _ in $(seq 300); do
		curl -fsS -o /dev/null --max-time 2 "$1" 2>/dev/null && return 0
		kill -0 "$2" 2>/dev/null || { say "process $2 exited before $1 answered"; return 1; }
		sleep 0.1
	done
	say "$1 did not answer within 30s"
	return 1
}

# login URL: print a fresh token for the user "reader".
login() {
	curl -fsS --max-time 30 -H 'Content-Type: application/json' \
		-d "{\"username\":\"reader\",\"password\":\"$PASSWORD\"}" "$1/api/auth/login/" |
		grep -o '"token":"[0-9a-f]*"' | cut -d'"' -f4
}

SERVERS="$OUT/servers.txt"
: >"$SERVERS"

# --- users file, made with the real CLI --------------------------------------------
# "bench" takes the login load; "reader" holds the tokens /info is driven with
# (authsvc keeps 100 tokens per user: the login runs would evict them).
USERS="$OUT/users.json"
rm -f "$USERS" "$USERS.lock"
PASSWORD=$(head -c 64 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 24)
for user in bench reader; do
	printf '%s\n' "$PASSWORD" | "$OUT/authsvc" user add --users "$USERS" --cost "$COST" \
		--name "$user" --email "$user@example.com" --group bench "$user"
done
export BENCH_USER=bench BENCH_PASSWORD="$PASSWORD"

# --- in-process servers (bench_test.go TestBenchServe): 1k and 1M live tokens -------
# Started first: filling a million sessions takes a few seconds.
inproc=()
start_inproc() { # name tokens access-log(on|off)
	rm -f "$OUT/$1.addr"
	AUTHSVC_BENCH_SERVE="$OUT/$1.addr" AUTHSVC_BENCH_TOKENS="$2" AUTHSVC_BENCH_ACCESS_LOG="$3" \
		"$OUT/authsvc.test" -test.run '^TestBenchServe$' -test.timeout 20m >/dev/null 2>&1 &
	pids+=($!)
	inproc+=("$1:$!")
}
start_inproc inproc-1k 1000 on
start_inproc inproc-1m 1000000 on
start_inproc inproc-1k-nolog 1000 off

# --- Redis ---------------------------------------------------------------------------
redis_url=""
if command -v redis-server >/dev/null 2>&1; then
	rport=$(free_port)
	redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --daemonize no >"$OUT/redis.log" 2>&1 &
	rpid=$!
	pids+=("$rpid")
	for _ in $(seq 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$rport") 2>/dev/null && { redis_url="redis://127.0.0.1:$rport/0"; break; }
		kill -0 "$rpid" 2>/dev/null || break
		sleep 0.1
	done
	[ -n "$redis_url" ] || say "redis-server did not start (see $OUT/redis.log): no Redis column"
else
	say "no redis-server: no Redis column"
fi

# --- authsvc and the baseline --------------------------------------------------------
# The login throttle is raised: all the load comes from 127.0.0.1. The hash
# policy is the users' own (bcrypt at $COST), so that no login rehashes.
AUTHSVC_FLAGS=(--login-rate 100000 --login-burst 100000 --login-failures 100000000 --user-failures 100000000 --cost "$COST")
start_authsvc() { # name store [more serve flags]
	local name=$1 store=$2 port pid
	shift 2
	port=$(free_port)
	"$OUT/authsvc" serve --addr "127.0.0.1:$port" --users "$USERS" --store "$store" "${AUTHSVC_FLAGS[@]}" "$@" >/dev/null 2>&1 &
	pid=$!
	pids+=("$pid")
	wait_http "http://127.0.0.1:$port/healthz" "$pid"
	echo "$name http://127.0.0.1:$port $(login "http://127.0.0.1:$port")" >>"$SERVERS"
}
start_authsvc authsvc memory
start_authsvc authsvc-noaccess memory --access-log=false
if [ -n "$redis_url" ]; then start_authsvc authsvc-redis "$redis_url"; fi

bport=$(free_port)
"$OUT/baseline" --addr "127.0.0.1:$bport" --users "$USERS" >/dev/null 2>&1 &
bpid=$!
pids+=("$bpid")
wait_http "http://127.0.0.1:$bport/inflight" "$bpid"
echo "baseline http://127.0.0.1:$bport $(login "http://127.0.0.1:$bport")" >>"$SERVERS"

for entry in "${inproc[@]}"; do
	name=${entry%%:*}
	pid=${entry##*:}
	for _ in $(seq 600); do
		[ -s "$OUT/$name.addr" ] && break
		kill -0 "$pid" 2>/dev/null || { say "$name exited before serving"; exit 1; }
		sleep 0.1
	done
	[ -s "$OUT/$name.addr" ] || { say "$name did not start within 60s"; exit 1; }
	read -r addr token <"$OUT/$name.addr"
	echo "$name http://$addr $token" >>"$SERVERS"
done

while read -r name url token; do
	[ -n "$token" ] || { say "$name: no token from $url"; exit 1; }
done <"$SERVERS"

# --- measure ---------------------------------------------------------------------------
say "servers up; measuring (about 4 minutes)"
# shellcheck disable=SC2086 # BENCH_ARGS is a list of flags
"$OUT/driver" -cost "$COST" -authsvc-flags "${AUTHSVC_FLAGS[*]}" -servers "$SERVERS" \
	-bcryptrate "$OUT/bcryptrate" -testbin "$OUT/authsvc.test" -lua bench/login.lua \
	-out "$OUT/latest.txt" -runs "$OUT/runs.txt" ${BENCH_ARGS:-} &
dpid=$!
pids=("$dpid" "${pids[@]}")
wait "$dpid"
