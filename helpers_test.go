package atomicredis

// The servers the tests run on (internal/testserver, which documents the
// environment variables), each with an engine in the test's namespace.

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testcluster"
	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// servers runs f once on miniredis and once more on the real server when
// REDIS_ADDR is set; when it is not, the "redis" subtest says so as a SKIP.
// Likewise "cluster" on the multi-node cluster of REDIS_CLUSTER_ADDRS.
// Each server is one Redis with a key namespace of the test's own, so
// tests on a shared real server never see each other's keys.
func servers(t *testing.T, f func(t *testing.T, s *testserver.Server)) {
	t.Helper()
	t.Run("miniredis", func(t *testing.T) { f(t, testserver.Mini(t)) })
	t.Run("redis", func(t *testing.T) {
		addr := testserver.RedisAddr()
		if addr == "" {
			testserver.Skip(t, "REDIS_ADDR not set: real-server run skipped")
		}
		f(t, testserver.Real(t, "redis", addr))
	})
	t.Run("cluster", func(t *testing.T) { f(t, clusterServer(t)) })
}

// privateServer is a redis-server of the test's own, for tests that change
// its configuration or stop it, which a shared server must never see. It
// skips the test when no redis-server is on PATH.
func privateServer(t *testing.T, name string) *testserver.Server {
	t.Helper()
	return testserver.On(t, name, testserver.PrivateRedis(t).Addr())
}

// clusterServer is the multi-node cluster's server (REDIS_CLUSTER_ADDRS),
// or a skip saying why not: the variable is unset, or the test is one that
// cannot run on a multi-node cluster (notOnCluster).
func clusterServer(t *testing.T) *testserver.Server {
	t.Helper()
	seeds := testserver.ClusterSeeds()
	if len(seeds) == 0 {
		testserver.Skip(t, "REDIS_CLUSTER_ADDRS not set: multi-node cluster run skipped")
	}
	top, _, _ := strings.Cut(t.Name(), "/")
	if why, ok := notOnCluster[top]; ok {
		t.Skip("not on a multi-node cluster: " + why)
	}
	return testcluster.New(t, seeds)
}

// notOnCluster are the behavioural tests that cannot run on a multi-node
// cluster, and why. The cluster's own faults are TestFailover_Kill and
// TestFailover_Stall.
var notOnCluster = map[string]string{
	"TestFaults_MutualExclusion":                 proxied,
	"TestRelease_VoidsALateAttempt":              proxied,
	"TestFaults_Admission":                       proxied,
	"TestSemaphore_WeightedAdmissionUnderFaults": proxied,
	"TestRW_UnderFaults":                         proxied,
	"TestLease_ExtendBeatsLateExtension":         proxied,
	"TestEngine_Close":                           proxied,
	"TestWake_NoLostWakeup":                      proxied,
	"TestFaults_BookFairSemaphoreOverAdmits":     proxied,
	"TestFaults_BookLockCutBeforeExpire":         proxied,
	"TestFaults_BookRefreshRevives":              proxied,
	"TestFaults_UnlockRetriesACutConnection":     proxied,
	"TestElection_ObserveSeesALeaseRunOut":       proxied,
	"TestGuarded_EvalUnderFaults":                proxied,
	"TestLinear_Lock":                            proxied,
	"TestLinear_RW":                              proxied,
	"TestLinear_Semaphore":                       proxied,
	"TestLinear_LockAll":                         proxied,
	"TestLinear_Election":                        proxied,
	"TestAcquire_BoundedPoolNoDeadlock":          ownPool,
	"TestRW_DeadReader":                          ownPool,
}

const (
	proxied = "its fault proxy fronts one server address"
	ownPool = "it dials its own pool to one server address"
)

func newPool(t testing.TB, addr string) *redis.Pool { return testserver.NewPool(t, addr) }

func testNamespace() string { return testserver.Namespace() }

// engine returns an Engine on s with the test's namespace, closed when
// the test s is for ends (s.T).
func engine(s *testserver.Server, opts ...Option) *Engine {
	var pool Pool = s.Pool
	if s.Engines != nil { // a multi-node cluster's client
		pool = s.Engines
	}
	e := New(pool, append([]Option{WithNamespace(s.NS)}, opts...)...)
	s.T.Cleanup(func() { e.Close(context.Background()) })
	return e
}

// serverMicros is the server's clock in microseconds (TIME).
func serverMicros(s *testserver.Server, t testing.TB) int64 {
	t.Helper()
	v, err := redis.Int64s(s.Do("TIME"))
	if err != nil || len(v) != 2 {
		t.Fatalf("TIME: %v, %v", v, err)
	}
	return v[0]*1e6 + v[1]
}

func ctxT(t testing.TB) context.Context { return testserver.Context(t) }

var keysRE = regexp.MustCompile(`KEYS\[(\d+)\]`)

// maxKeyIndex is the highest KEYS[n] a script mentions.
func maxKeyIndex(src string) int {
	n := 0
	for _, m := range keysRE.FindAllStringSubmatch(src, -1) {
		if v, _ := strconv.Atoi(m[1]); v > n {
			n = v
		}
	}
	return n
}

func splitLines(s string) []string { return strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n") }

// in is the oracle's ids in partition part.
func (o activeOracle) in(part int) activeOracle {
	in := activeOracle{}
	for p, ids := range o {
		in[p] = map[int64]bool{}
		for id := range ids {
			if placeOf(id).part() == part {
				in[p][id] = true
			}
		}
	}
	return in
}

// shardIDs returns shard s's ids at offsets from, from+step, ... (n of them).
func shardIDs(s, from, step, n int64) []int64 {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = s*activeShardIDs + from + int64(i)*step
	}
	return ids
}

// smallTries makes buckets hold leaf ids and shards turn dense at dense ids
// until the test ends, so that a few hundred ids make deep tries and dense
// shards, whose bitmaps are built a quarter of dense ids a step (several
// steps, over several scripts). Tests that call it do not run in parallel.
func smallTries(t *testing.T, leaf, dense int64) {
	oldLeaf, oldDense, oldStep := activeLeafIDs.Swap(leaf), activeDenseIDs.Swap(dense), activeStepIDs.Swap(max(1, dense/4))
	t.Cleanup(func() { activeLeafIDs.Store(oldLeaf); activeDenseIDs.Store(oldDense); activeStepIDs.Store(oldStep) })
}

// activeOracle is what a test marked: period -> ids.
type activeOracle map[string]map[int64]bool

func (o activeOracle) mark(p string, ids ...int64) {
	if o[p] == nil {
		o[p] = map[int64]bool{}
	}
	for _, id := range ids {
		o[p][id] = true
	}
}

// counts are the union's and the intersection's sizes over periods.
func (o activeOracle) counts(periods []string) (union, inter int64) {
	seen := map[int64]int{}
	distinct := map[string]bool{}
	for _, p := range periods {
		if !distinct[p] {
			distinct[p] = true
			for v := range o[p] {
				seen[v]++
			}
		}
	}
	for _, n := range seen {
		union++
		if n == len(distinct) {
			inter++
		}
	}
	return union, inter
}

// v3's activity bitmaps (one 1 MiB bitmap a shard of 8,388,096 ids from
// its first mark, an index of shards a period), kept as the baseline the
// benchmarks measure v4 against, as v2's scripts are: its scripts are in
// testdata/v3_bits_*.lua, and bits_mark and bits_merge, which v4 still
// runs on dense shards.
var (
	v3BitsIndex  = testScript(1, mustRead("testdata/v3_bits_index.lua"))
	v3BitsShards = testScript(-1, mustRead("testdata/v3_bits_shards.lua"))
	v3BitsCount  = testScript(-1, mustRead("testdata/v3_bits_count.lua"))
	v3BitsIs     = testScript(1, mustRead("testdata/v3_bits_is.lua"))
)

// v3 is a v3 engine's activity over e's connections.
type v3 struct{ e *Engine }

// shardKey is v3's <ns>bits:{<group>:<shard>}<suffix>.
func (v v3) shardKey(group string, shard int64, suffix string) string {
	return v.e.ns + "bits:{" + group + ":" + strconv.FormatInt(shard, 10) + "}" + suffix
}

// index puts shards in the period's index, as v3's first mark of a shard.
func (v v3) index(ctx context.Context, group, period string, shards ...int64) (int64, error) {
	args := []any{v.e.group(group).indexKey(period), v.e.activityTTL.Milliseconds()}
	for _, s := range shards {
		args = append(args, s)
	}
	return redis.Int64(v.e.eval(ctx, v.e.group(group), v3BitsIndex, args...))
}

// mark is v3's MarkActive in the steady state (the shard indexed and
// made): one bits_mark script, -1 for "indexed before".
func (v v3) mark(ctx context.Context, group, period string, id int64) error {
	_, err := v.e.eval(ctx, v.e.group(group), scriptBitsMark, v.shardKey(group, id/activeShardIDs, ":"+period), -1, id%activeShardIDs)
	return err
}

// isActive is v3's IsActive: GETBIT on the id's shard.
func (v v3) isActive(ctx context.Context, group, period string, id int64) (bool, error) {
	n, err := redis.Int64(v.e.eval(ctx, v.e.group(group), v3BitsIs, v.shardKey(group, id/activeShardIDs, ":"+period), id%activeShardIDs))
	return n == 1, err
}

// count is v3's CountActive (OR) or CountActiveAll (AND).
func (v v3) count(ctx context.Context, group, op string, periods ...string) (int64, error) {
	obj := v.e.group(group)
	args := []any{len(periods)}
	for _, p := range periods {
		args = append(args, obj.indexKey(p))
	}
	shards, err := redis.Int64s(v.e.eval(ctx, obj, v3BitsShards, append(args, op)...))
	if err != nil {
		return 0, err
	}
	var total atomic.Int64
	err = v.e.eachShard(ctx, obj, shards, func(ctx context.Context, s int64) error {
		args := []any{len(periods) + 1, v.shardKey(group, s, "")}
		for _, p := range periods {
			args = append(args, v.shardKey(group, s, ":"+p))
		}
		n, err := redis.Int64(v.e.eval(ctx, obj, v3BitsCount, append(args, op)...))
		total.Add(n)
		return err
	})
	return total.Load(), err
}

func uniqueSorted(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range in {
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}

// countingGets counts the connections a pool hands out.
type countingGets struct {
	Pool
	n atomic.Int64
}

func (p *countingGets) GetContext(ctx context.Context) (redis.Conn, error) {
	p.n.Add(1)
	return p.Pool.GetContext(ctx)
}

// next is the next state Observe sends, failing t after 2 s (before an
// observer reads again to renew its registration, at 3 s).
func next(t *testing.T, ch <-chan Leader) Leader {
	t.Helper()
	select {
	case l, ok := <-ch:
		if !ok {
			t.Fatal("Observe's channel closed")
		}
		return l
	case <-time.After(2 * time.Second):
		t.Fatal("no state from Observe in 2 s")
	}
	return Leader{}
}

// cutOff makes 200 acquisitions with deadlines of 0 to 390 µs, so many are
// cut off mid-call, and gives back those that succeed.
func cutOff(t *testing.T, acquire func(ctx context.Context) (release func(context.Context) error, err error)) {
	t.Helper()
	cut := 0
	for i := 0; i < 200; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%40)*10*time.Microsecond)
		release, err := acquire(ctx)
		cancel()
		if err != nil {
			cut++
			continue
		}
		if err := release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d of 200 acquisitions cut off by their context", cut)
}

// waitWatchdogs waits (generously) until exactly n watchdog goroutines
// run. Counting all goroutines would also count miniredis's and the pool's.
func waitWatchdogs(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for watchdogs() != n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := watchdogs(); got != n {
		t.Errorf("%d watchdog goroutines running, want %d", got, n)
	}
}

func watchdogs() int {
	buf := make([]byte, 1<<20)
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), "atomicredis.(*renewer).watch(")
}

const testQueueTTL = 150 * time.Millisecond

func waitEngine(s *testserver.Server) *Engine {
	e := engine(s)
	e.queueTTL = testQueueTTL
	return e
}

// queued is how many waiters the server shows in an object's queue.
func countQueued(s *testserver.Server, t testing.TB, key string) int {
	t.Helper()
	if lock, ok := strings.CutSuffix(key, ":queue"); ok && strings.HasPrefix(lock, s.NS+"lock:{") {
		// A plain lock's queue lives in its one hash (scripts/lib/lock.lua):
		// its entries are the fields "e:<n>".
		keys, err := redis.Strings(s.Do("HKEYS", lock))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, k := range keys {
			if strings.HasPrefix(k, "e:") {
				n++
			}
		}
		return n
	}
	n, err := redis.Int(s.Do("ZCARD", key))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// lockFence is the last fence of the named plain lock, read from its hash's
// holding (scripts/lib/lock.lua): the holder's, or the one a free lock
// keeps.
func lockFence(s *testserver.Server, name string) (int64, error) {
	v, err := redis.String(s.Do("HGET", s.NS+"lock:{"+name+"}", "v"))
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(strings.TrimPrefix(v, "+"))
	if len(fields) < 2 {
		return 0, fmt.Errorf("lock %q holds %q, no fence", name, v)
	}
	return strconv.ParseInt(fields[1], 10, 64)
}

// waitQueued waits (generously) until the server shows n waiters queued.
func waitQueued(s *testserver.Server, t testing.TB, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for countQueued(s, t, key) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d queued, want %d", key, countQueued(s, t, key), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// stallPool's connections wait stallFor before each Receive (the
// renewer's pipelined batch) while stall is set.
type stallPool struct {
	p        Pool
	stall    atomic.Bool
	stallFor time.Duration
	slowHash atomic.Value // a script's hash whose reply Do holds back slowFor
	slowFor  time.Duration
}

func (p *stallPool) GetContext(ctx context.Context) (redis.Conn, error) {
	c, err := p.p.GetContext(ctx)
	if err != nil {
		return nil, err
	}
	return &stallConn{Conn: c, p: p}, nil
}

type stallConn struct {
	redis.Conn
	p *stallPool
}

func (c *stallConn) Do(cmd string, args ...any) (any, error) {
	v, err := c.Conn.Do(cmd, args...)
	if h, _ := c.p.slowHash.Load().(string); h != "" && cmd == "EVALSHA" && len(args) > 0 && args[0] == h {
		time.Sleep(c.p.slowFor)
	}
	return v, err
}

func (c *stallConn) Receive() (any, error) {
	if c.p.stall.Load() {
		time.Sleep(c.p.stallFor)
	}
	return c.Conn.Receive()
}

// crc16 is CRC-16/XMODEM, the checksum Redis Cluster hashes keys with.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for i := 0; i < 8; i++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// keySlot follows the cluster spec: hash the part between the first '{'
// and the next '}' if it is not empty, else the whole key.
func keySlot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return crc16([]byte(key)) % 16384
}

// info reads one integer field of INFO.
func info(s *testserver.Server, t testing.TB, field string) int64 {
	t.Helper()
	text, err := redis.String(s.Do("INFO"))
	if err != nil {
		t.Fatal(err)
	}
	v, ok := testserver.InfoField(text, field)
	if !ok {
		t.Fatalf("INFO has no %s", field)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		t.Fatalf("INFO %s: %q", field, v)
	}
	return n
}

// limitMemory sets maxmemory a little above what the server uses now, with
// the given policy, and returns the limit.
func limitMemory(s *testserver.Server, t testing.TB, policy string, headroom int64) int64 {
	t.Helper()
	limit := info(s, t, "used_memory") + headroom
	s.Must(t, "CONFIG", "SET", "maxmemory-policy", policy)
	s.Must(t, "CONFIG", "SET", "maxmemory", limit)
	return limit
}

const fillerSize = 16 << 10

// fill writes filler strings (without TTL) under the test's namespace, from
// number from on, until a write fails or n were written: first of 16 KiB,
// then, once a big one is refused, of 16 bytes, so the server ends up at
// its limit rather than one big value short of it. It returns how many
// writes succeeded and the error that stopped it. The filler is never
// read, so LRU evicts older keys first.
func fill(s *testserver.Server, t testing.TB, from, n int) (int, error) {
	t.Helper()
	c := s.Pool.Get()
	defer c.Close()
	value := strings.Repeat("x", fillerSize)
	written := 0
	for written < n {
		_, err := c.Do("SET", s.NS+"filler:"+strconv.Itoa(from+written), value)
		switch {
		case err == nil:
			written++
		case len(value) == fillerSize && isOOM(err):
			value = value[:16] // top up with small values
		default:
			return written, err
		}
	}
	return written, nil
}

func isOOM(err error) bool { return err != nil && strings.Contains(err.Error(), "OOM") }

// recorder keeps the events an engine reports.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) observe(ev Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

// wait waits (generously) for an event of type typ about name, and
// returns it.
func (r *recorder) wait(t *testing.T, typ EventType, name string) Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		for _, ev := range r.events {
			if ev.Type == typ && ev.Name == name {
				r.mu.Unlock()
				return ev
			}
		}
		r.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no %s event for %q in 10s; saw %v", typ, name, r.types())
		}
		time.Sleep(time.Millisecond)
	}
}

func (r *recorder) types() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, ev := range r.events {
		out = append(out, ev.Type.String()+" "+ev.Name)
	}
	return out
}

// logRecords is a slog handler that keeps its records.
type logRecords struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }

func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.records = append(h.records, r.Clone())
	h.mu.Unlock()
	return nil
}

func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h *logRecords) WithGroup(string) slog.Handler { return h }

// call is one public operation, run for its error only.
type call struct {
	name string
	run  func(ctx context.Context, e *Engine) error
}

// validCalls are every public operation on good arguments; each must work
// on a cluster node (no CROSSSLOT) and fail cleanly on a bad engine.
func validCalls() []call {
	var l, r1, r2, w *Lock
	var p *Permit
	return []call{
		{"TryLock", func(ctx context.Context, e *Engine) (err error) {
			l, err = e.TryLock(ctx, "c1", LockOptions{Watchdog: true})
			return err
		}},
		{"IsLocked", func(ctx context.Context, e *Engine) error { _, err := e.IsLocked(ctx, "c1"); return err }},
		{"LockInfo", func(ctx context.Context, e *Engine) error { _, err := e.LockInfo(ctx, "c1"); return err }},
		{"Lock.Extend", func(ctx context.Context, e *Engine) error { return l.Extend(ctx, time.Minute) }},
		{"Lock.TTL", func(ctx context.Context, e *Engine) error { _, err := l.TTL(ctx); return err }},
		{"Lock.Held", func(ctx context.Context, e *Engine) error { _, err := l.Held(ctx); return err }},
		{"Lock.Unlock", func(ctx context.Context, e *Engine) error { return l.Unlock(ctx) }},
		{"Lock", func(ctx context.Context, e *Engine) (err error) {
			l, err = e.Lock(ctx, "c1", LockOptions{})
			if err == nil {
				err = l.Unlock(ctx)
			}
			return err
		}},
		{"ForceUnlock", func(ctx context.Context, e *Engine) error { _, err := e.ForceUnlock(ctx, "c7"); return err }},
		{"TryRLock", func(ctx context.Context, e *Engine) (err error) {
			r1, err = e.TryRLock(ctx, "c6", LockOptions{Watchdog: true})
			return err
		}},
		{"RLock", func(ctx context.Context, e *Engine) (err error) {
			r2, err = e.RLock(ctx, "c6", LockOptions{})
			return err
		}},
		{"Lock.Extend (reader)", func(ctx context.Context, e *Engine) error { return r1.Extend(ctx, time.Minute) }},
		{"Lock.TTL (reader)", func(ctx context.Context, e *Engine) error { _, err := r2.TTL(ctx); return err }},
		{"Lock.Unlock (reader)", func(ctx context.Context, e *Engine) error { return r1.Unlock(ctx) }},
		{"Lock.Unlock (reader)", func(ctx context.Context, e *Engine) error { return r2.Unlock(ctx) }},
		{"TryWLock", func(ctx context.Context, e *Engine) (err error) {
			w, err = e.TryWLock(ctx, "c6", LockOptions{})
			return err
		}},
		{"Lock.Unlock (writer)", func(ctx context.Context, e *Engine) error { return w.Unlock(ctx) }},
		{"WLock", func(ctx context.Context, e *Engine) (err error) {
			w, err = e.WLock(ctx, "c6", LockOptions{})
			if err == nil {
				err = w.Unlock(ctx)
			}
			return err
		}},
		{"AcquireSemaphore", func(ctx context.Context, e *Engine) (err error) {
			p, err = e.AcquireSemaphore(ctx, "c2", SemaphoreOptions{Limit: 2, Wait: time.Second})
			return err
		}},
		{"SemaphoreHolders", func(ctx context.Context, e *Engine) error { _, err := e.SemaphoreHolders(ctx, "c2"); return err }},
		{"SemaphoreInfo", func(ctx context.Context, e *Engine) error { _, err := e.SemaphoreInfo(ctx, "c2"); return err }},
		{"SetSemaphoreLimit", func(ctx context.Context, e *Engine) error { return e.SetSemaphoreLimit(ctx, "c2", 3) }},
		{"TryAcquireSemaphore", func(ctx context.Context, e *Engine) error {
			q, err := e.TryAcquireSemaphore(ctx, "c2", SemaphoreOptions{})
			if err == nil {
				err = q.Release(ctx)
			}
			return err
		}},
		{"Permit.Extend", func(ctx context.Context, e *Engine) error { return p.Extend(ctx, 0) }},
		{"Permit.Release", func(ctx context.Context, e *Engine) error { return p.Release(ctx) }},
		{"AddRecent", func(ctx context.Context, e *Engine) error { return e.AddRecent(ctx, "c3", "Alice") }},
		{"SuggestRecent", func(ctx context.Context, e *Engine) error { _, err := e.SuggestRecent(ctx, "c3", "al", 5); return err }},
		{"RemoveRecent", func(ctx context.Context, e *Engine) error { return e.RemoveRecent(ctx, "c3", "Alice") }},
		{"AddMembers", func(ctx context.Context, e *Engine) error { return e.AddMembers(ctx, "c4", "abc", "abd", "b") }},
		{"Suggest", func(ctx context.Context, e *Engine) error { _, err := e.Suggest(ctx, "c4", "ab", 5); return err }},
		{"RemoveMembers", func(ctx context.Context, e *Engine) error { return e.RemoveMembers(ctx, "c4", "abc") }},
		{"MarkActive", func(ctx context.Context, e *Engine) error { return e.MarkActive(ctx, "c5", "d1", 7) }},
		{"IsActive", func(ctx context.Context, e *Engine) error { _, err := e.IsActive(ctx, "c5", "d1", 7); return err }},
		{"CountActive", func(ctx context.Context, e *Engine) error { _, err := e.CountActive(ctx, "c5", "d1", "d2"); return err }},
		{"MarkActiveMany", func(ctx context.Context, e *Engine) error { return e.MarkActiveMany(ctx, "c5", "d2", 7, 1<<23, 1<<40) }},
		{"CountActiveAll", func(ctx context.Context, e *Engine) error {
			_, err := e.CountActiveAll(ctx, "c5", "d1", "d2")
			return err
		}},
	}
}

// giveBack releases what an acquisition took, or returns its error.
func giveBack(ctx context.Context) func(*Permit, error) error {
	return func(p *Permit, err error) error {
		if err != nil {
			return err
		}
		return p.Release(ctx)
	}
}

// dataCommands is how many commands s has run (INFO commandstats), but
// those that run no script's data work: EVALSHA itself, INFO, PING and
// the engine's subscription.
func dataCommands(t *testing.T, s *testserver.Server) int64 {
	t.Helper()
	info, err := redis.String(s.Do("INFO", "commandstats"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		switch name {
		case "evalsha", "eval", "info", "ping", "subscribe", "unsubscribe", "script", "client", "hello", "select":
			continue
		}
		v, _, _ := strings.Cut(rest, ",")
		c, _ := strconv.ParseInt(v, 10, 64)
		n += c
	}
	return n
}

// ownerBytes is an Owner with every byte a lock's value could trip on:
// spaces, a newline, a NUL, bytes that are not UTF-8, and digits after a
// space (as the lock's own fields are).
var ownerBytes = "host-7 pid 42\n\x00\xff\xfe 12 34 " + strings.Repeat("x", 64)

func lockInfo(t *testing.T, e *Engine, name string) LockInfo {
	t.Helper()
	info, err := e.LockInfo(ctxT(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// waitFor polls cond every millisecond for up to 5 s, failing t if it never
// holds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition never met in 5 s")
}

// semInfoCounts is SemaphoreInfo's counts, which compare with ==.
type semInfoCounts struct{ Limit, Holders, Waiting int }

func semCounts(i SemaphoreInfo) semInfoCounts { return semInfoCounts{i.Limit, i.Holders, i.Waiting} }

// events records an engine's events by type and name.
type events struct {
	mu sync.Mutex
	by map[EventType][]Event
}

func (ev *events) observe(e Event) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if ev.by == nil {
		ev.by = map[EventType][]Event{}
	}
	ev.by[e.Type] = append(ev.by[e.Type], e)
}

func (ev *events) of(t EventType) []Event {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return append([]Event(nil), ev.by[t]...)
}

// startReplicated starts a private primary and a replica of it, and waits
// until the replica is in sync. Both servers have the same namespace.
func startReplicated(t *testing.T) (primary, replica *testserver.Server) {
	t.Helper()
	p := testserver.On(t, "primary", testserver.PrivateRedis(t).Addr())
	r := testserver.On(t, "replica", testserver.PrivateRedis(t).Addr())
	r.NS = p.NS
	primary, replica = p, r
	host, port, _ := net.SplitHostPort(primary.Addr)
	replica.Must(t, "REPLICAOF", host, port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, _ := redis.String(primary.Do("INFO", "replication"))
		if strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online") {
			return primary, replica
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica not in sync after 30s:\n%s", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// slowExtensions is a queue TTL whose extensions (a third of it) come too late
// for any bound these tests set on a wake-up.
const slowExtensions = 30 * time.Second

// needsOneAddress skips a test that dials the server itself on a
// multi-node cluster, saying so.
func needsOneAddress(t *testing.T, s *testserver.Server) {
	t.Helper()
	if s.Engines != nil {
		t.Skip("needs one server address (a private pool or the fault proxy); not on the multi-node cluster")
	}
}

// rawWaiter queues token on a lock with the acquire script, as a waiter
// of an engine named id that never extends (it may as well be dead).
func rawWaiter(s *testserver.Server, t *testing.T, name, token, id string, entry time.Duration) {
	t.Helper()
	k := func(suffix string) any { return s.NS + "lock:{" + name + "}" + suffix }
	c := s.Pool.Get()
	defer c.Close()
	if _, err := redis.Int64s(scriptLockAcquire.Do(c, k(""),
		token, time.Minute.Milliseconds(), 1, entry.Milliseconds(), id)); err != nil {
		t.Fatal(err)
	}
}

// subscribers is how many clients are subscribed to an engine's wake
// channel.
func subscribers(s *testserver.Server, t *testing.T, e *Engine) int {
	t.Helper()
	v, err := redis.Values(s.Do("PUBSUB", "NUMSUB", e.wake.channel))
	if err != nil || len(v) != 2 {
		t.Fatalf("PUBSUB NUMSUB: %v, %v", v, err)
	}
	n, _ := redis.Int(v[1], nil)
	return n
}

// waitSubscribed waits until e's wake subscription is up and its waiters
// have had a moment for the look they take once it is.
func waitSubscribed(s *testserver.Server, t *testing.T, e *Engine) {
	t.Helper()
	if s.Engines != nil { // PUBSUB NUMSUB counts one node's subscribers
		time.Sleep(200 * time.Millisecond)
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for subscribers(s, t, e) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("no wake subscription in 10s")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
}

type permitOrErr struct {
	p   *Permit
	err error
	at  time.Time
}

// got waits (generously) for an acquisition started by acquireAsync.
func got(t *testing.T, c <-chan permitOrErr) permitOrErr {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("acquisition did not return in 10 s")
	}
	return permitOrErr{}
}

// Do runs s on c, as redigo's Script.Do does.
func (s *script) Do(c redis.Conn, keysAndArgs ...any) (any, error) { return evalsha(c, s, keysAndArgs) }

// Hash is s's SHA-1 in hex, computed from its text (a test may).
func (s *script) Hash() string {
	sum := sha1.Sum([]byte(s.src))
	return hex.EncodeToString(sum[:])
}

// testScript is a script of the tests' own, loaded on first use.
func testScript(keyCount int, src string) *script { return newScript("test", keyCount, src) }

// slowlog reads SLOWLOG through do: each command's time in µs by its
// arguments as SLOWLOG keeps them (the first 32, each cut at 128 bytes),
// joined by NUL; a command seen twice keeps its longer time. It resets
// SLOWLOG after.
func slowlog(do func(string, ...any) (any, error)) (map[string]int64, error) {
	entries, err := redis.Values(do("SLOWLOG", "GET", -1))
	if err != nil {
		return nil, err
	}
	cmds := map[string]int64{}
	for _, entry := range entries {
		f, _ := redis.Values(entry, nil)
		us, _ := redis.Int64(f[2], nil)
		args, _ := redis.Strings(f[3], nil)
		k := strings.Join(args, "\x00")
		cmds[k] = max(cmds[k], us)
	}
	_, err = do("SLOWLOG", "RESET")
	return cmds, err
}

// lockEntry is a queue entry of a plain lock's hash (scripts/lib/lock.lua).
type lockEntry struct {
	token             string
	deadline, arrival int64
	live              bool // its deadline is past the server's clock
}

// lockQueue reads the queue entries of the named plain lock, in order.
func lockQueue(s *testserver.Server, t testing.TB, name string) []lockEntry {
	t.Helper()
	c := s.Pool.Get()
	defer c.Close()
	v, err := redis.Values(lockQueueScript.Do(c, s.NS+"lock:{"+name+"}"))
	if err != nil {
		t.Fatal(err)
	}
	var out []lockEntry
	for i := 0; i+3 < len(v); i += 4 {
		token, _ := redis.String(v[i], nil)
		deadline, _ := redis.Int64(v[i+1], nil)
		arrival, _ := redis.Int64(v[i+2], nil)
		live, _ := redis.Int64(v[i+3], nil)
		out = append(out, lockEntry{token, deadline, arrival, live == 1})
	}
	return out
}

// lockQueueScript replies token, deadline, arrival and live (1 or 0) of
// each entry of a plain lock's hash (KEYS[1]), in queue order.
var lockQueueScript = redis.NewScript(1, `
local h, tail = string.match(redis.call('HGET', KEYS[1], 'q') or '', '^(%d+) (%d+)')
local s = {h, tail}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for i = tonumber(s[1]) or 1, tonumber(s[2]) or 0 do
  local e = redis.call('HGET', KEYS[1], 'e:' .. i)
  if e then
    local token, deadline, arrival = string.match(e, '^(%S+) (%d+) (%d+)')
    out[#out + 1] = token
    out[#out + 1] = deadline
    out[#out + 1] = arrival
    out[#out + 1] = tonumber(deadline) > now and 1 or 0
  end
end
return out`)

// lockArrival is the arrival number of token's entry in the named plain
// lock's queue; it fails the test if the token is not queued.
func lockArrival(s *testserver.Server, t testing.TB, name, token string) int64 {
	t.Helper()
	for _, e := range lockQueue(s, t, name) {
		if e.token == token {
			return e.arrival
		}
	}
	t.Fatalf("%s is not queued for lock %q", token, name)
	return 0
}

// lockLease is the remaining lease of the named plain lock's holding in
// ms, as lock_pttl reads it: its hash's PTTL, or, while the lock is
// flagged, its lease's end 'd' against the server's clock.
func lockLease(s *testserver.Server, t testing.TB, name string) int64 {
	t.Helper()
	c := s.Pool.Get()
	defer c.Close()
	v, err := redis.Int64(lockLeaseScript.Do(c, s.NS+"lock:{"+name+"}"))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var lockLeaseScript = redis.NewScript(1, `
local v = redis.call('HGET', KEYS[1], 'v')
if not v or string.byte(v, 1) ~= 43 then return redis.call('PTTL', KEYS[1]) end
local t = redis.call('TIME')
return (tonumber(redis.call('HGET', KEYS[1], 'd')) or 0) - (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))`)
