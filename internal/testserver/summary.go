package testserver

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
)

var (
	skipMu  sync.Mutex
	skipped = map[string]int{} // by reason
)

// Skip skips t for want of a server, saying why, and counts the reason for
// Summary.
func Skip(t testing.TB, reason string) {
	t.Helper()
	skipMu.Lock()
	skipped[reason]++
	skipMu.Unlock()
	t.Skip(reason)
}

// Summary says, once at the end of a package's tests, which servers they
// ran against and how many tests or runs were skipped for want of which.
func Summary() string {
	var b strings.Builder
	b.WriteString("servers: miniredis")
	for _, s := range []struct{ what, env string }{
		{"real server", "REDIS_ADDR"}, {"cluster node", "REDIS_CLUSTER_ADDR"},
	} {
		if addr := os.Getenv(s.env); addr != "" {
			fmt.Fprintf(&b, "; %s %s at %s (%s)", s.what, version(addr), addr, s.env)
		}
	}
	if seeds := ClusterSeeds(); len(seeds) > 0 {
		fmt.Fprintf(&b, "; multi-node cluster %s at %s (REDIS_CLUSTER_ADDRS)", version(seeds[0]), strings.Join(seeds, ","))
	}
	if path, err := exec.LookPath("redis-server"); err == nil {
		fmt.Fprintf(&b, "; private servers from %s", path)
	}
	for _, s := range Builds {
		if bin := os.Getenv(s.Env); bin != "" {
			fmt.Fprintf(&b, "; %s from %s (%s)", s.Name, bin, s.Env)
		}
	}
	b.WriteString("\n")
	skipMu.Lock()
	defer skipMu.Unlock()
	var reasons []string
	for r := range skipped {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	if len(reasons) == 0 {
		b.WriteString("skipped for want of a server: none\n")
	}
	for _, r := range reasons {
		fmt.Fprintf(&b, "skipped %d: %s\n", skipped[r], r)
	}
	return b.String()
}

// version is the server's name and version at addr, or why it is unknown.
func version(addr string) string {
	c, err := redis.Dial("tcp", addr, redis.DialConnectTimeout(time.Second), redis.DialReadTimeout(time.Second))
	if err != nil {
		return "(unreachable)"
	}
	defer c.Close()
	info, err := redis.String(c.Do("INFO", "server"))
	if err != nil {
		return "(no INFO)"
	}
	name, ver := "redis", ""
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "redis_version", "valkey_version":
			ver = v
		case "server_name":
			name = v
		}
	}
	return name + " " + ver
}
