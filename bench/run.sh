#!/usr/bin/env bash
# make bench: build authsvc and the baseline, start them (and Redis, a
# throwaway PostgreSQL cluster, and the in-process servers of bench_test.go)
# on free loopback ports, write the users files (a 1M-user one among them),
# let bench/driver measure everything side by side, print one table (also
# saved to bench/out/latest.txt), and stop every process started here and
# remove the cluster, whatever happens. authsvc runs with its throttle at the
# defaults: the table counts 429 replies per part.
# Knobs (environment): GO, BENCH_COST (bcrypt cost, default 12), BENCH_USERS
# (users in the big file, default 1000000), BENCH_PG_USERS (default 100000),
# BENCH_ARGS (extra driver flags, e.g. "-info-rounds 3"; see go run ./bench/driver -h),
# BENCH_ONLY=info (about three minutes: the /info part alone, authsvc on the
# memory store with a session, with a personal access token, and without the
# access log, against the baseline and the baseline with authsvc's server
# limits; then, when redis-server is installed, the junk-token flood on
# Redis; table in bench/out/info.txt; e.g.
# BENCH_ONLY=info BENCH_ARGS="-info-rounds 12" make bench),
# BENCH_ONLY=reset (about a minute and a half: the reset flood alone, two
# authsvc on a users file of BENCH_RESET_USERS users, default 60000; table
# in bench/out/reset.txt).
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
COST=${BENCH_COST:-12}
BIG_N=${BENCH_USERS:-1000000}
PG_N=${BENCH_PG_USERS:-100000}
RESET_N=${BENCH_RESET_USERS:-60000}
OUT=bench/out
ONLY=${BENCH_ONLY:-}
mkdir -p "$OUT"

say() { printf 'bench: %s\n' "$*" >&2; }

# full: whether every part runs (not BENCH_ONLY=info or reset).
case "$ONLY" in
"" | info | reset) ;;
*) say "BENCH_ONLY=$ONLY: want info, reset or nothing"; exit 2 ;;
esac
full() { [ -z "$ONLY" ]; }

# --- every process started here is stopped on exit ---------------------------
pids=()
pg_stop=() # the command that stops the PostgreSQL cluster, once it runs
pg_dir=""
cleanup() {
	local pid alive
	set +e
	if [ "${#pg_stop[@]}" -gt 0 ]; then "${pg_stop[@]}" >/dev/null 2>&1; fi
	if [ -n "$pg_dir" ]; then rm -rf "$pg_dir"; fi
	rm -f "$OUT/big-users.json" "$OUT/big-users.json.lock" "$OUT/pg-users.json" # hundreds of MB
	rm -f "$OUT"/reset-users.json* # and its lock, cut-offs and reset links
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
command -v curl >/dev/null 2>&1 || need+=(curl)
pg_bins() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
if full; then
	command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
	[ -n "$(pg_bins)" ] || need+=(postgresql)
fi
if [ "${#need[@]}" -gt 0 ]; then
	say "installing ${need[*]} (apt-get)"
	$sudo apt-get update -qq
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null ||
		say "apt-get install ${need[*]} failed"
fi
command -v wrk >/dev/null 2>&1 || { say "wrk is required"; exit 1; }
command -v curl >/dev/null 2>&1 || { say "curl is required"; exit 1; }

# --- build -----------------------------------------------------------------------
say "building authsvc, the baseline and the driver${ONLY:+ (BENCH_ONLY=$ONLY)}"
"$GO" build -o "$OUT/authsvc" .
"$GO" build -o "$OUT/baseline" ./bench/baseline
"$GO" build -o "$OUT/driver" ./bench/driver
if full || [ "$ONLY" = reset ]; then
	"$GO" build -o "$OUT/bigusers" ./bench/bigusers
fi
if full; then
	say "building bcryptrate and authsvc's test binaries"
	"$GO" build -o "$OUT/bcryptrate" ./bench/bcryptrate
	"$GO" test -c -o "$OUT/authsvc.test" ./internal/cli
	"$GO" test -c -o "$OUT/faults.test" ./integration/faults
	"$GO" test -c -o "$OUT/httpapi.test" ./internal/httpapi
fi

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

# --- users files ---------------------------------------------------------------------
# Made with the real CLI: users.json with the default hash policy (argon2id),
# users-bcrypt.json with --cost $COST. "bench" takes the login load; "reader"
# holds the tokens /info is driven with (authsvc keeps 100 tokens per user:
# the login runs would evict them).
PASSWORD=$(head -c 64 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 24)
export BENCH_PASSWORD="$PASSWORD"
USERS="$OUT/users.json"
USERS_BCRYPT="$OUT/users-bcrypt.json"
rm -f "$USERS" "$USERS.lock" "$USERS_BCRYPT" "$USERS_BCRYPT.lock"
for user in bench reader; do
	printf '%s\n' "$PASSWORD" | "$OUT/authsvc" user add --users "$USERS" \
		--name "$user" --email "$user@example.com" --group bench "$user" >/dev/null
	printf '%s\n' "$PASSWORD" | "$OUT/authsvc" user add --users "$USERS_BCRYPT" --cost "$COST" \
		--name "$user" --email "$user@example.com" --group bench "$user" >/dev/null
done
# Big files (bench/bigusers): a few argon2id hashes of $PASSWORD, reused.
BIG="$OUT/big-users.json"
PG_USERS="$OUT/pg-users.json"
if full; then
	rm -f "$BIG" "$BIG.lock"
	"$OUT/bigusers" -o "$BIG" -n "$BIG_N"
	"$OUT/bigusers" -o "$PG_USERS" -n "$PG_N"
fi
# The reset flood's (issue 37): two instances on it, their reset links
# appended to reset-users.json.resets; fresh for every bench.
RESET_USERS="$OUT/reset-users.json"
rm -f "$RESET_USERS"*
reset_args=(-reset-skip "BENCH_ONLY=$ONLY")
if full || [ "$ONLY" = reset ]; then
	"$OUT/bigusers" -o "$RESET_USERS" -n "$RESET_N"
	reset_args=(-reset-users "$RESET_USERS" -reset-n "$RESET_N")
fi
if [ "$ONLY" = reset ]; then
	say "measuring the reset flood alone (BENCH_ONLY=$ONLY)"
	# shellcheck disable=SC2086 # BENCH_ARGS is a list of flags
	"$OUT/driver" -only reset -authsvc "$OUT/authsvc" "${reset_args[@]}" \
		-out "$OUT/reset.txt" -runs "$OUT/reset-runs.txt" ${BENCH_ARGS:-} &
	dpid=$!
	pids=("$dpid" "${pids[@]}")
	wait "$dpid"
	exit
fi

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
if full; then
	start_inproc inproc-1k 1000 on
	start_inproc inproc-1m 1000000 on
	start_inproc inproc-1k-nolog 1000 off
fi

# --- Redis ---------------------------------------------------------------------------
# Started for BENCH_ONLY=info too when installed: the junk-token part
# (issue 30) floods an authsvc on it.
redis_url=""
redis_skip=""
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
	[ -n "$redis_url" ] || redis_skip="redis-server did not start (see $OUT/redis.log)"
else
	redis_skip="no redis-server"
fi
[ -z "$redis_skip" ] || say "Redis rows not measured: $redis_skip"

# --- a three-primary Redis Cluster (issue 22, point 3) ----------------------------------
# Each node on a free port whose bus port (+10000) is free too, in a folder
# of its own (nodes.conf), joined by redis-cli --cluster create.
cluster_url=""
cluster_skip=""
start_cluster() {
	local i port dir nodes=() addrs=() ok
	command -v redis-cli >/dev/null 2>&1 || { cluster_skip="no redis-cli"; return; }
	[ -z "$redis_skip" ] || { cluster_skip="$redis_skip"; return; }
	full || { cluster_skip="BENCH_ONLY=$ONLY"; return; }
	for i in 0 1 2; do
		# Below the ephemeral range (32768 up), client port and bus port
		# alike: a port a connection holds as its local end answers no
		# connect, so only there is "nothing answers" as good as "free".
		for _ in $(seq 200); do
			port=$((20000 + RANDOM % 2700))
			! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null &&
				! (exec 3<>"/dev/tcp/127.0.0.1/$((port + 10000))") 2>/dev/null && break
		done
		dir=$(mktemp -d "$OUT/cluster-node.XXXXXX")
		redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --cluster-enabled yes --cluster-config-file nodes.conf \
			--save "" --appendonly no --daemonize no >"$dir/redis.log" 2>&1 &
		pids+=($!)
		nodes+=("$dir")
		addrs+=("127.0.0.1:$port")
	done
	for a in "${addrs[@]}"; do
		for _ in $(seq 100); do
			redis-cli -h 127.0.0.1 -p "${a##*:}" ping >/dev/null 2>&1 && break
			sleep 0.1
		done
	done
	if ! redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >"$OUT/cluster-create.log" 2>&1; then
		cluster_skip="redis-cli --cluster create failed (see $OUT/cluster-create.log)"
		return
	fi
	for a in "${addrs[@]}"; do
		ok=""
		for _ in $(seq 100); do
			redis-cli -h 127.0.0.1 -p "${a##*:}" cluster info 2>/dev/null | grep -q 'cluster_state:ok' && { ok=1; break; }
			sleep 0.1
		done
		[ -n "$ok" ] || { cluster_skip="cluster node $a never reported cluster_state:ok"; return; }
	done
	cluster_url="redis+cluster://$(IFS=,; echo "${addrs[*]}")"
}
start_cluster
[ -z "$cluster_skip" ] || ! full || say "Redis Cluster row not measured: $cluster_skip"

# --- PostgreSQL: a throwaway cluster ------------------------------------------------
# It refuses to run as root: then its commands run as the postgres user, in
# a directory that user owns.
pg_url=""
pg_skip=""
start_postgres() {
	local bin as port
	bin=$(pg_bins)
	[ -n "$bin" ] || { pg_skip="no PostgreSQL in /usr/lib/postgresql/*/bin"; return; }
	as=()
	if [ "$(id -u)" -eq 0 ]; then
		id postgres >/dev/null 2>&1 || { pg_skip="running as root and no postgres user"; return; }
		as=(runuser -u postgres --)
	fi
	pg_dir=$(mktemp -d /tmp/authsvc-bench-pg.XXXXXX)
	chmod 755 "$pg_dir"
	[ "${#as[@]}" -eq 0 ] || chown postgres: "$pg_dir"
	if ! "${as[@]}" "$bin/initdb" -D "$pg_dir/data" --auth=trust -U postgres -E UTF8 --locale=C --no-sync \
		--no-instructions >"$OUT/postgres.log" 2>&1; then
		pg_skip="initdb failed (see $OUT/postgres.log)"
		return
	fi
	port=$(free_port)
	pg_stop=("${as[@]}" "$bin/pg_ctl" -D "$pg_dir/data" -m immediate -w stop)
	if ! "${as[@]}" "$bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/postgres.log" -w -t 30 -o \
		"-p $port -k $pg_dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
		start >>"$OUT/postgres.log" 2>&1; then
		cat "$pg_dir/postgres.log" >>"$OUT/postgres.log" 2>/dev/null
		pg_skip="PostgreSQL did not start (see $OUT/postgres.log)"
		return
	fi
	pg_url="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
}
if full; then
	start_postgres
	[ -z "$pg_skip" ] || say "PostgreSQL part not measured: $pg_skip"
fi

# --- authsvc and the baseline --------------------------------------------------------
# Every serve flag at its default, the login throttle included, although all
# the load comes from 127.0.0.1: the driver counts 429 replies per part.
# authsvc-bcrypt serves the bcrypt users with --cost $COST, so no login rehashes.
AUTHSVC_FLAGS=()
start_authsvc() { # name users store [more serve flags]
	local name=$1 users=$2 store=$3 port pid
	shift 3
	port=$(free_port)
	"$OUT/authsvc" serve --addr "127.0.0.1:$port" --users "$users" --store "$store" ${AUTHSVC_FLAGS[@]+"${AUTHSVC_FLAGS[@]}"} "$@" >/dev/null 2>&1 &
	pid=$!
	pids+=("$pid")
	wait_http "http://127.0.0.1:$port/healthz" "$pid"
	echo "$name http://127.0.0.1:$port $(login "http://127.0.0.1:$port")" >>"$SERVERS"
}
start_authsvc authsvc "$USERS" memory
# Issue 30: the same process with a personal access token of "reader",
# minted by the real CLI into the users file it reads (re-read within 1 s;
# its check finds a token made by another process at once anyway): the row
# sends "Bearer <token>" where authsvc's sends "Token <session>", so their
# ratio is the token kind's alone.
pat=$("$OUT/authsvc" token create --users "$USERS" --name bench --scope info reader 2>"$OUT/token-create.log") ||
	{ say "authsvc token create failed: $(cat "$OUT/token-create.log")"; exit 1; }
read -r _ authsvc_url _ < <(grep '^authsvc ' "$SERVERS")
echo "authsvc-pat $authsvc_url $pat Bearer $pat" >>"$SERVERS"
start_authsvc authsvc-noaccess "$USERS" memory --access-log=false
# Redis twice: as before the token cache (every check a round trip) and with
# it at its default (issue 22).
if [ -n "$redis_url" ] && full; then
	start_authsvc authsvc-redis "$USERS" "$redis_url" --store-cache 0
	start_authsvc authsvc-redis-cache "$USERS" "$redis_url"
fi
# The same two on a three-primary cluster (issue 22, point 3).
if [ -n "$cluster_url" ]; then
	start_authsvc authsvc-cluster "$USERS" "$cluster_url" --store-cache 0
	start_authsvc authsvc-cluster-cache "$USERS" "$cluster_url"
fi
if full; then
	start_authsvc authsvc-bcrypt "$USERS_BCRYPT" memory --cost "$COST"
fi

bport=$(free_port)
"$OUT/baseline" --addr "127.0.0.1:$bport" --users "$USERS_BCRYPT" >/dev/null 2>&1 &
bpid=$!
pids+=("$bpid")
wait_http "http://127.0.0.1:$bport/inflight" "$bpid"
echo "baseline http://127.0.0.1:$bport $(login "http://127.0.0.1:$bport")" >>"$SERVERS"
# The /info part alone also runs the baseline with authsvc's server limits
# (timeouts): what net/http's work for them costs, beside the target's bare
# baseline.
if ! full; then
	lport=$(free_port)
	"$OUT/baseline" --addr "127.0.0.1:$lport" --users "$USERS_BCRYPT" --limits >/dev/null 2>&1 &
	pids+=($!)
	wait_http "http://127.0.0.1:$lport/inflight" "$!"
	echo "baseline-limits http://127.0.0.1:$lport $(login "http://127.0.0.1:$lport")" >>"$SERVERS"
fi

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
if ! full; then
	say "servers up; measuring /info alone (BENCH_ONLY=$ONLY)"
	# shellcheck disable=SC2086 # BENCH_ARGS is a list of flags
	"$OUT/driver" -only info -servers "$SERVERS" -users "$USERS" -redis-url "$redis_url" -redis-skip "$redis_skip" \
		-out "$OUT/info.txt" -runs "$OUT/info-runs.txt" ${BENCH_ARGS:-} &
	dpid=$!
	pids=("$dpid" "${pids[@]}")
	wait "$dpid"
	exit
fi
say "servers up; measuring (about 5 minutes; the PostgreSQL part waits 30 s for the hash workers to exit idle, and 22 s for its transaction counts)"
pg_args=(-pg-skip "$pg_skip")
[ -z "$pg_url" ] || pg_args=(-pg-url "$pg_url" -pg-users "$PG_USERS" -pg-n "$PG_N")
# shellcheck disable=SC2086 # BENCH_ARGS is a list of flags
"$OUT/driver" -cost "$COST" -authsvc-flags "${AUTHSVC_FLAGS[*]-}" -servers "$SERVERS" \
	-bcryptrate "$OUT/bcryptrate" -testbin "$OUT/authsvc.test" -integrationbin "$OUT/faults.test" -httpapibin "$OUT/httpapi.test" -authsvc "$OUT/authsvc" -lua bench/login.lua \
	-users "$USERS" -redis-url "$redis_url" -redis-skip "$redis_skip" -cluster-skip "$cluster_skip" -big-users "$BIG" -big-n "$BIG_N" "${pg_args[@]}" "${reset_args[@]}" \
	-out "$OUT/latest.txt" -runs "$OUT/runs.txt" ${BENCH_ARGS:-} &
dpid=$!
pids=("$dpid" "${pids[@]}")
wait "$dpid"

# The Django switch-over's import at scale (issue 20): 100,000 pbkdf2_sha256
# users with one DRF key each, into a new PostgreSQL database and Redis
# (BenchmarkDjangoImport100k starts both itself).
say "importing 100,000 Django users and DRF keys into PostgreSQL and Redis"
import_out=$("$OUT/authsvc.test" -test.run '^$' -test.bench '^BenchmarkDjangoImport100k$' -test.benchtime 1x 2>&1) || true
if took=$(grep -Eo '[0-9.]+ s/import' <<<"$import_out"); then
	again=$(grep -Eo '[0-9.]+ s/update-again' <<<"$import_out")
	echo "django import, 100k users + 100k DRF keys into PostgreSQL + Redis: $took; the same dump again with --update: $again" | tee -a "$OUT/latest.txt"
else
	echo "django import: not measured: $(tail -n 3 <<<"$import_out" | tr '\n' ' ')" | tee -a "$OUT/latest.txt"
fi

# Capacity on paper (issue 22, point 4): what a login, a failed login and a
# token check that misses the instance's cache cost the Redis above, in
# round trips, commands and Redis CPU, and how many of each one Redis core
# carries (bench/rediscost; a hit of the cache costs Redis nothing).
if [ -n "$redis_url" ]; then
	say "measuring what each operation costs Redis"
	if cost=$($GO run ./bench/rediscost -redis "$redis_url" -n 20000 -c 32 2>&1); then
		{ echo "Redis cost per operation (one Redis core, 32 goroutines of the real store and throttle):"; sed 's/^/  /' <<<"$cost"; } | tee -a "$OUT/latest.txt"
	else
		echo "Redis cost per operation: not measured: $cost" | tee -a "$OUT/latest.txt"
	fi
fi

# heal_row TEST NAME PATTERN LABEL TARGET: runs integration/faults' TEST
# under AUTHSVC_BENCH=1 (its outage bounds API.md's, not go test's 30 s)
# and writes the row NAME, LABEL: the figure PATTERN's group matches in
# its log (TARGET); "not measured" when it skipped, FAILED with its first
# errors otherwise. AUTHSVC_TEST_BINARY: the tests run the authsvc built
# above instead of building one from the module root.
heal_row() {
	local test=$1 name=$2 pattern=$3 label=$4 target=$5 out figure
	out=$(AUTHSVC_BENCH=1 AUTHSVC_TEST_BINARY="$OUT/authsvc" "$OUT/faults.test" -test.run "^$test\$" -test.count 1 -test.v 2>&1) || true
	figure=$(sed -nE "s/.*$pattern.*/\1/p" <<<"$out" | head -n 1) || true
	if [ -n "$figure" ] && grep -q "^--- PASS: $test" <<<"$out"; then
		echo "$name, $label: $figure (target: $target)"
	elif grep -q "^--- SKIP: $test" <<<"$out"; then
		echo "$name: not measured: $(grep -A1 -- '--- SKIP' <<<"$out" | tail -n 1 | sed 's/^ *//')"
	else
		echo "$name: FAILED ${figure:+($figure) }: $(grep -E '^\s+fault[a-z]*_test.go:[0-9]+: ' <<<"$out" | head -n 3 | sed 's/^ *//' | tr '\n' ' ')"
	fi | tee -a "$OUT/latest.txt"
}

# Redis restart time to heal: TestFaultRedisRestart kills Redis with
# SIGKILL under login and /info load, starts it again, and logs how long
# after it answered the last 503 came.
say "restarting Redis under load (TestFaultRedisRestart)"
heal_row TestFaultRedisRestart "Redis restart time to heal" 'healed ([^ ]+) after Redis answered' \
	"kill -9 and restart, 1 instance under load" "within 5 s"

# Sentinel time to heal (issue 22): TestFaultSentinelFailover starts a
# primary, a replica and three sentinels, runs two authsvc instances on
# redis+sentinel:// under login and /info load, kills the primary with
# SIGKILL, and logs how long until both answer 200 again.
say "killing a Sentinel-managed primary under load (TestFaultSentinelFailover)"
heal_row TestFaultSentinelFailover "Sentinel time to heal" 'sentinel time to heal: (.*)' \
	"kill -9 of the primary, 2 instances under load" "within 10 s of the promotion"
