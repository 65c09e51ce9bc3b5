package atomicredis

import (
	"bytes"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testcluster"
	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/mna/redisc"
)

// faultProxy is a loopback TCP proxy between clients and Redis that delays
// traffic with jitter and cuts connections, so the checkers can see what
// latency and network failures do to locks and semaphores.
type faultProxy struct {
	ln     net.Listener
	target string
	faults // fixed when the proxy starts

	mu     sync.Mutex
	conns  map[net.Conn]net.Conn // client side -> server side
	wg     sync.WaitGroup
	cuts   atomic.Int64
	cutOnN atomic.Int64 // cuts made by cutOn

	refuse atomic.Bool  // close new connections at once
	lag    atomic.Int64 // ns every client chunk is held back, on top of faults
}

// faults are what a proxy does to the traffic.
type faults struct {
	delayP   float64       // chance that a chunk is held back
	maxDelay time.Duration // held back by uniform [0, maxDelay)
	// cutOn, if set, cuts a connection instead of forwarding a client
	// chunk that contains it (e.g. "EXPIRE": between two commands).
	cutOn []byte
	// cutTimes, if set, is how many times cutOn cuts; later chunks that
	// contain it pass.
	cutTimes int64
	// cutAfter makes cutOn cut the client off and then forward the chunk:
	// the command runs, its reply is lost.
	cutAfter bool
	// holdOn, if set, holds back client chunks that contain it for holdFor
	// (e.g. the second MULTI block of a two-step acquire).
	holdOn  []byte
	holdFor time.Duration
}

// startProxy listens on a free loopback port and forwards to target until
// the test ends.
func startProxy(t testing.TB, target string, f faults) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{ln: ln, target: target, faults: f, conns: map[net.Conn]net.Conn{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// faultyEngines are n engines in s's namespace sharing one pool through a
// proxy that delays a fifth of all chunks by up to 20 ms; the caller
// starts the proxy's chaos.
func faultyEngines(t *testing.T, s *testserver.Server, n int) ([]*Engine, *faultProxy) {
	proxy := startProxy(t, s.Addr, faults{delayP: 0.2, maxDelay: 20 * time.Millisecond})
	pool := newPool(t, proxy.addr())
	pool.MaxIdle = 64
	es := make([]*Engine, n)
	for i := range es {
		es[i] = New(pool, WithNamespace(s.NS))
	}
	return es, proxy
}

func (p *faultProxy) addr() string { return p.ln.Addr().String() }

func (p *faultProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.refuse.Load() {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c] = s
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, s, true)
		go p.pipe(s, c, false)
	}
}

// pipe copies one direction chunk by chunk; a delayed chunk delays the ones
// behind it, as on a slow link.
func (p *faultProxy) pipe(from, to net.Conn, fromClient bool) {
	defer p.wg.Done()
	defer from.Close()
	defer to.Close()
	if fromClient {
		defer func() {
			p.mu.Lock()
			delete(p.conns, from)
			p.mu.Unlock()
		}()
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			if fromClient && p.cutOn != nil && bytes.Contains(buf[:n], p.cutOn) &&
				(p.cutTimes == 0 || p.cutOnN.Add(1) <= p.cutTimes) {
				p.cuts.Add(1)
				if p.cutAfter {
					from.Close() // the other pipe cannot deliver the reply
					to.Write(buf[:n])
					time.Sleep(100 * time.Millisecond) // the server runs it before it sees the close
				}
				return
			}
			if fromClient && p.holdOn != nil && bytes.Contains(buf[:n], p.holdOn) {
				time.Sleep(p.holdFor)
			}
			if lag := time.Duration(p.lag.Load()); fromClient && lag > 0 {
				time.Sleep(lag)
			}
			if p.delayP > 0 && rand.Float64() < p.delayP {
				time.Sleep(rand.N(p.maxDelay))
			}
			if _, err := to.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a cut: closing both sides passes it on
		}
	}
}

// cutRandom closes one open connection, both sides, mid-whatever.
func (p *faultProxy) cutRandom() {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := rand.IntN(len(p.conns) + 1)
	for c, s := range p.conns {
		if n == 0 {
			c.Close()
			s.Close()
			delete(p.conns, c)
			p.cuts.Add(1)
			return
		}
		n--
	}
}

// cutAll closes every open connection, both sides.
func (p *faultProxy) cutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c, s := range p.conns {
		c.Close()
		s.Close()
		delete(p.conns, c)
		p.cuts.Add(1)
	}
}

// chaos cuts a random connection every 20-200 ms until stopped.
func (p *faultProxy) chaos() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(20*time.Millisecond + rand.N(180*time.Millisecond)):
				p.cutRandom()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func (p *faultProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c, s := range p.conns {
		c.Close()
		s.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// proxiedCluster is a client of the cluster at seeds whose every node is
// reached through a fault proxy of its own, made on the client's first
// connection to that node (the addresses the cluster gives stay the
// nodes' own: the client dials each node's proxy in their place).
type proxiedCluster struct {
	t       testing.TB
	f       faults
	mu      sync.Mutex
	proxies map[string]*faultProxy
	chaotic bool
	stops   []func()
}

func newProxiedCluster(t testing.TB, seeds []string, f faults) (*redisc.Cluster, *proxiedCluster) {
	t.Helper()
	pc := &proxiedCluster{t: t, f: f, proxies: map[string]*faultProxy{}}
	return testcluster.ClientVia(t, seeds, func(addr string) string { return pc.proxy(addr).addr() }), pc
}

// proxy is node addr's proxy, made on first use (with chaos, once chaos
// has started).
func (pc *proxiedCluster) proxy(addr string) *faultProxy {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	p, ok := pc.proxies[addr]
	if !ok {
		p = startProxy(pc.t, addr, pc.f)
		pc.proxies[addr] = p
		if pc.chaotic {
			pc.stops = append(pc.stops, p.chaos())
		}
	}
	return p
}

// chaos starts every node proxy's chaos, now and as they are made.
func (pc *proxiedCluster) chaos() (stop func()) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.chaotic = true
	for _, p := range pc.proxies {
		pc.stops = append(pc.stops, p.chaos())
	}
	return func() {
		pc.mu.Lock()
		stops := pc.stops
		pc.chaotic, pc.stops = false, nil
		pc.mu.Unlock()
		for _, stop := range stops {
			stop()
		}
	}
}

// cuts is how many connections the node proxies cut, in all.
func (pc *proxiedCluster) cuts() int64 {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	n := int64(0)
	for _, p := range pc.proxies {
		n += p.cuts.Load()
	}
	return n
}
