#!/usr/bin/env bash
# measure.sh BINARY USERS_FILE: the users file's cost in a running authsvc.
# Prints: the load time (start to the "listening" line), steady VmRSS, the
# peak VmRSS of a reload (SIGHUP; VmHWM after `echo 5 > clear_refs`), and the
# wall time of `authsvc user add` into a copy of the file. Linux only.
set -euo pipefail
bin=$1 users=$2
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
cp "$users" "$work/users.json"
start=$(date +%s.%N)
"$bin" serve --users "$work/users.json" --addr 127.0.0.1:0 --access-log=false --reload-interval 1h 2>"$work/log" &
pid=$!
until grep -q 'msg=listening' "$work/log"; do
	kill -0 "$pid" || { cat "$work/log"; exit 1; }
	sleep 0.05
done
end=$(date +%s.%N)
echo "load: $(echo "$end - $start" | bc) s (start to listening)"
sleep 5
rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
n=$(grep -c '"username"' "$users")
echo "steady VmRSS: $((rss / 1024)) MiB, $((rss * 1024 / n)) B/user ($n users)"
echo 5 >/proc/$pid/clear_refs # VmHWM := VmRSS
kill -HUP "$pid"
until grep -q 'users file reloaded\|users file refused' "$work/log"; do sleep 0.05; done
hwm=$(awk '/VmHWM/ {print $2}' /proc/$pid/status)
sleep 5
after=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
echo "reload: peak VmHWM $((hwm / 1024)) MiB ($(echo "scale=2; $hwm / $rss" | bc)x steady), VmRSS after $((after / 1024)) MiB"
grep 'users file re' "$work/log" | tail -1
kill "$pid"
wait "$pid" 2>/dev/null || true
start=$(date +%s.%N)
printf 'a long enough password\n' | "$bin" user add --users "$work/users.json" measure-newuser >/dev/null
end=$(date +%s.%N)
echo "user add: $(echo "$end - $start" | bc) s wall"
