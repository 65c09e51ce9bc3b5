#!/usr/bin/env bash
# ir.sh: the budget's instruction counts (docs/handoff.md, "The budget").
# Each line runs N cycles (default 2000) of an acquire and a release
# script on one name (cmd/budget-ir), against a redis-server of its own
# run under valgrind's callgrind, and prints the server's instructions
# per cycle: everything the server did for them, reading the request,
# running the script, writing the reply. Instructions repeat from run to
# run where microseconds on a shared machine do not. The library's lines
# run its scripts as the engine sends them (-write-scripts), with the
# keys and arguments acquire.go and release.go pass; redislock's run its
# scripts as its source in the module cache has them.
#
#	cd peers && testdata/budget/ir.sh [N]
#
# Needs valgrind, callgrind_control, redis-server and redis-cli on PATH.
set -euo pipefail
cd "$(dirname "$0")/../.." # the peers module
n=${1:-2000}
dir=$(mktemp -d)
server=
cleanup() {
  [ -z "$server" ] || { kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true; }
  rm -rf "$dir"
}
trap cleanup EXIT

(cd .. && go test -run '^TestEmbed_WriteScripts$' -count=1 . -write-scripts "$dir/lib" >/dev/null)
go build -o "$dir/budget-ir" ./cmd/budget-ir
rl=$(go list -m -f '{{.Dir}}' github.com/bsm/redislock)
sed -n '/^\tluaObtain  = redis.NewScript(`$/,/^`)$/p' "$rl/redislock.go" | sed '1d;$d' >"$dir/redislock_obtain.lua"
sed -n 's/^\tluaRelease = redis.NewScript(`\(.*\)`)$/\1/p' "$rl/redislock.go" >"$dir/redislock_release.lua"
[ -s "$dir/redislock_obtain.lua" ] && [ -s "$dir/redislock_release.lua" ] || { echo "ir.sh: redislock's scripts not found in $rl" >&2; exit 1; }

port=$((20000 + RANDOM % 20000))
valgrind --tool=callgrind --callgrind-out-file="$dir/out.%p.%n" \
  redis-server --port "$port" --save '' --appendonly no >"$dir/server.log" 2>&1 &
server=$!
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') under callgrind; instructions per cycle, $n cycles a line"

run=0
# line LABEL ACQUIRE RELEASE ACQUIRE-ARGS RELEASE-ARGS [FLAGS...]
line() {
  local label=$1 acquire=$2 release=$3 aargs=$4 rargs=$5
  shift 5
  run=$((run + 1))
  "$dir/budget-ir" -addr "127.0.0.1:$port" -n 50 -name "warm$run" -acquire "$acquire" -release "$release" \
    -acquire-args "$aargs" -release-args "$rargs" "$@"
  local before
  before=$(ls "$dir" | grep -c '^out\.' || true)
  callgrind_control -z "$server" >/dev/null 2>&1
  "$dir/budget-ir" -addr "127.0.0.1:$port" -n "$n" -name "line$run" -acquire "$acquire" -release "$release" \
    -acquire-args "$aargs" -release-args "$rargs" "$@"
  callgrind_control -d "$server" >/dev/null 2>&1
  while [ "$(ls "$dir" | grep -c '^out\.' || true)" -le "$before" ]; do sleep 0.1; done
  sleep 0.2
  local total
  total=$(grep -h -m1 '^summary:\|^totals:' "$(ls -t "$dir"/out.* | head -1)" | awk '{print $2}')
  printf '%8d  %s\n' $((total / n)) "$label"
}

b=testdata/budget
lib=$dir/lib
# The library's keys and arguments (acquire.go's attempts, release.go's
# unlock): the lock, its counter, queue, waiters and the token's abandon
# mark; token, mode, entry and lease ms, retention ms, engine id, wake prefix.
la='5 %k %k:fence %k:queue %k:waiters %k:void:%t %t 0 1000 10000 86400000 3408f1ee-81fa budget:wake:'
lw='5 %k %k:fence %k:queue %k:waiters %k:void:%t %t 1 1000 10000 86400000 3408f1ee-81fa budget:wake:'
lr='4 %k %k:fence %k:queue %k:waiters %t 86400000 budget:wake: 3408f1ee-81fa'
# v5's (one key a name): the lock's hash; token, lease ms (a one try),
# then mode, entry ms, engine id (a wait) | token, wake prefix, engine id.
l5a='1 %k %t 10000'
l5w='1 %k %t 10000 1 1000 3408f1ee-81fa'
l5r='1 %k %t budget:wake: 3408f1ee-81fa'
# xd's: the same keys, the engine's constants packed in one argument.
xa='5 %k %k:fence %k:queue %k:waiters %k:void:%t %t 0 10000 1000:86400000:3408f1ee-81fa:budget:wake:'
xr='4 %k %k:fence %k:queue %k:waiters %t 86400000 budget:wake:3408f1ee-81fa'

echo "-- the uncontended cycle: an acquire and its release"
line "redislock v0.9.4 (obtain: SET NX PX | release: GET, DEL)" "$dir/redislock_obtain.lua" "$dir/redislock_release.lua" '1 %k %t 22 10000' '1 %k %t'
line "two EVALSHA of nothing, no keys, no arguments" $b/empty.lua $b/empty.lua '0' '0'
line "two EVALSHA of nothing, redislock's keys and arguments (1+3 | 1+1)" $b/empty.lua $b/empty.lua '1 %k %t 22 10000' '1 %k %t'
line "two EVALSHA of nothing, v4's keys and arguments (5+7 | 4+4)" $b/empty.lua $b/empty.lua "$la" "$lr"
line "two EVALSHA of nothing, the library's keys and arguments (1+2 | 1+3)" $b/empty.lua $b/empty.lua "$l5a" "$l5r"
line "two EVALSHA of nothing, xd's: the same keys, the constants packed (5+4 | 4+3)" $b/empty.lua $b/empty.lua "$xa" "$xr"
line "  and the reads: GET, EXISTS | GET, ZCARD (rung reads)" $b/reads_acquire.lua $b/reads_release.lua "$la" "$lr" -check=false
line "  and the lease: SET PX | DEL (rung lease)" $b/lease_acquire.lua $b/lease_release.lua "$la" "$lr"
line "  and the counter's INCR (rung fence)" $b/fence_acquire.lua $b/lease_release.lua "$la" "$lr"
line "the library (lock_acquire | lock_release: HGET, HSET, PEXPIRE | HGET, HSET)" "$lib/lock_acquire.lua" "$lib/lock_release.lua" "$l5a" "$l5r"
line "design t: the library's calls, 1 key + 3 | 1 + 1, a fence for a reply" $b/t_acquire.lua $b/t_release.lua '1 %k %t 10000 86400000' '1 %k %t'
line "design xd: fence in the value, keys declared (5+4 | 4+3): GET, SET PX | GET, SET PX" $b/xd_acquire.lua $b/xd_release.lua "$xa" "$xr"
line "design x1: fence in the value, 1 key + 2 | 1 + 2: GET, SET PX | GET, SET PX" $b/x1_acquire.lua $b/x1_release.lua '1 %k %t 10000' '1 %k %t 86400000'
line "design x1 with a free value kept as long as the lease (KEEPTTL)" $b/x1_acquire.lua $b/x1_release_keepttl.lua '1 %k %t 10000' '1 %k %t 86400000'
line "design x1 keeping no fence: GET, SET PX | GET, DEL" $b/x1_acquire.lua $b/del_release.lua '1 %k %t 10000' '1 %k %t'
line "design x1 with the abandon mark and the queue read: + EXISTS | + ZCARD" $b/x1v_acquire.lua $b/x1q_release.lua '1 %k %t 10000' '1 %k %t 86400000'
line "design z: the clock's fence, nothing kept: TIME, SET NX PX | GET, DEL" $b/z_acquire.lua $b/del_release.lua '1 %k %t 10000' '1 %k %t'
line "design z with the queue and the abandon mark read: + EXISTS | + ZCARD" $b/zq_acquire.lua $b/zq_release.lua '1 %k %t 10000' '1 %k %t'
line "design s: one string key, the lease's end and flags in the value, the clock read: GET, TIME, SET PX | GET, TIME, SET KEEPTTL" $b/s_acquire.lua $b/s_release.lua '1 %k %t 10000 86400000' '1 %k %t'
line "design s, its release without the clock" $b/s_acquire.lua $b/s_release_notime.lua '1 %k %t 10000 86400000' '1 %k %t'
line "design s with the queue's keys declared (4 keys)" $b/s_acquire.lua $b/s_release.lua '4 %k %k:q %k:w %k:x:%t %t 10000 86400000' '4 %k %k:q %k:w %k:x:%t %t 86400000'
line "design h: one hash a name, every key in it: HMGET, TIME, HSET, PEXPIRE | HMGET, TIME, HSET" $b/h_acquire.lua $b/h_release.lua '1 %k %t 10000 86400000' '1 %k %t'
line "design f: a fast script of one key, flags in the value, the full script on a flag: GET, SET PX | GET, SET KEEPTTL" $b/f_acquire.lua $b/f_release.lua '1 %k %t 10000' '1 %k %t'
line "design hp: design h with the lease as the hash's PX until a waiter or a mark flags it: HGET, HSET, PEXPIRE | HGET, HSET" $b/hp_acquire.lua $b/hp_release.lua '1 %k %t 10000' '1 %k %t'
line "design g: design f with its flag at a fixed place (no search): GET, SET PX | GET, SET KEEPTTL" $b/g_acquire.lua $b/g_release.lua '1 %k %t 10000' '1 %k %t'
line "design hpg: design hp with its flag at a fixed place: HGET, HSET, PEXPIRE | HGET, HSET" $b/hpg_acquire.lua $b/hpg_release.lua '1 %k %t 10000' '1 %k %t'
line "design m: one string while unflagged, read with MGET (no WRONGTYPE at a flagged hash): MGET, SET PX | MGET, SET KEEPTTL" $b/m_acquire.lua $b/m_release.lua "$l5a" "$l5r"
line "design zm: design z read with MGET, the library's arguments: TIME, SET NX PX | MGET, DEL" $b/z_acquire.lua $b/zm_release.lua "$l5a" "$l5r"
echo "-- a hot name's acquisition: a waiter's join while the lock is held, and the handoff to it"
line "two EVALSHA of nothing, v4's keys and arguments" $b/empty.lua $b/empty.lua "$lw" "$lr" -check=false
line "two EVALSHA of nothing, the library's keys and arguments" $b/empty.lua $b/empty.lua "$l5w" "$l5r" -check=false
line "the library (lock_acquire queues | lock_release hands over)" "$lib/lock_acquire.lua" "$lib/lock_release.lua" "$l5w" "$l5r" -handoff
line "the floor: GET, HSET, ZADD | GET, ZRANGE, HGET, ZREM, HDEL, SET PX" $b/hot_join.lua $b/hot_handoff.lua "$lw" "$lr" -handoff
line "design h: HMGET, TIME, HSET | HMGET, TIME, HGET, HDEL, HSET, PUBLISH" $b/h_join.lua $b/h_handoff.lua '1 %k %t 10000 86400000 3408f1ee-81fa' '1 %k %t budget:wake:' -handoff
echo "-- a hot name's steady state: the same, with 15 more waiters queued behind the one handed the lock"
line "the library, 15 more waiters queued" "$lib/lock_acquire.lua" "$lib/lock_release.lua" "$l5w" "$l5r" -handoff -queued 15
line "design h, 15 more waiters queued" $b/h_join.lua $b/h_handoff.lua '1 %k %t 10000 86400000 3408f1ee-81fa' '1 %k %t budget:wake:' -handoff -queued 15
