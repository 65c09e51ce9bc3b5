package atomicredis

import (
	"strings"
	"testing"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

func TestEmbed_ScriptsDeclareTheirKeys(t *testing.T) {
	files, err := scriptFS.ReadDir("scripts")
	if err != nil {
		t.Fatal(err)
	}
	loaded := 0
	for _, f := range files {
		if f.IsDir() { // scripts/lib: pieces put in front of scripts, not scripts
			continue
		}
		loaded++
		name := strings.TrimSuffix(f.Name(), ".lua")
		s, ok := scripts[name]
		if !ok {
			t.Errorf("scripts/%s is not loaded in embed.go", f.Name())
			continue
		}
		src, _ := scriptFS.ReadFile("scripts/" + f.Name())
		if s.keys < 0 {
			if !strings.Contains(string(src), "#KEYS") {
				t.Errorf("%s: declared a variable key count but never reads #KEYS", name)
			}
		} else if got, want := maxKeyIndex(string(src)), s.keys; got != want {
			t.Errorf("%s: script uses KEYS[%d], embed.go declares %d keys", name, got, want)
		}
		if !strings.HasPrefix(string(src), "-- "+name+":") {
			t.Errorf("%s: script should open with a comment naming it", name)
		}
	}
	if loaded != len(scripts) {
		t.Errorf("%d scripts in scripts/, %d loaded in embed.go", loaded, len(scripts))
	}
}

// After SCRIPT FLUSH the first EVALSHA answers NOSCRIPT; redigo's
// Script.DoContext must resend with EVAL, which loads the script again.
// (internal/suite's ScriptFlushFallsBackToEval checks the calls work over
// every client; this checks, by the script's hash, that EVAL reloaded it.)
func TestEmbed_ScriptFlushReloadsScript(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		l, err := e.TryLock(ctx, "sf", LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Must(t, "SCRIPT", "FLUSH")
		if ok, _ := redis.Ints(s.Do("SCRIPT", "EXISTS", scriptLockRelease.Hash())); len(ok) != 1 || ok[0] != 0 {
			t.Fatalf("SCRIPT EXISTS after FLUSH = %v", ok)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock after SCRIPT FLUSH: %v", err)
		}
		if ok, _ := redis.Ints(s.Do("SCRIPT", "EXISTS", scriptLockRelease.Hash())); len(ok) != 1 || ok[0] != 1 {
			t.Errorf("the EVAL fallback did not load the script: %v", ok)
		}
	})
}
