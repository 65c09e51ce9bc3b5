// Quickstart is a service that orders a cart at most once, whoever else
// asks at the same time: POST /carts/{id}/order takes the cart's lock and
// writes the order with the lock's fence, in a table that refuses a stale
// holder (schema.sql). main builds the pool and the engine once, checks
// that Redis answers, and hands them to the handler. A handler never builds
// a pool or an engine: per request, each call would dial a connection of
// its own, and each engine that waits would open a wake subscription of
// its own.
//
// It reads REDIS_ADDR (default localhost:6379), DATABASE_URL (a
// PostgreSQL URL) and LISTEN_ADDR (default localhost:8080):
//
//	psql "$DATABASE_URL" -f schema.sql
//	go run .
//	curl -X POST localhost:8080/carts/42/order
package main

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/atomicredis/atomicredis"
	"github.com/gomodule/redigo/redis"
)

func main() {
	redisAddr := cmp.Or(os.Getenv("REDIS_ADDR"), "localhost:6379")
	// One pool and one engine for the whole process, never one per request.
	pool := &redis.Pool{
		MaxIdle:     16, // keep connections: with 0, redigo closes each after one call
		MaxActive:   64,
		Wait:        true, // wait for a free connection rather than fail at once
		IdleTimeout: 5 * time.Minute,
		Dial: func() (redis.Conn, error) {
			return redis.Dial("tcp", redisAddr,
				redis.DialConnectTimeout(2*time.Second),
				redis.DialReadTimeout(10*time.Second), // longer than any blocking read of the engine's
				redis.DialWriteTimeout(2*time.Second))
		},
		TestOnBorrow: func(c redis.Conn, idleSince time.Time) error {
			if time.Since(idleSince) < 30*time.Second {
				return nil // a PING only for a connection idle a while, not one per call
			}
			_, err := c.Do("PING")
			return err
		},
	}
	defer pool.Close()
	e := atomicredis.New(pool, atomicredis.WithNamespace("app:"))
	defer e.Close(context.Background()) // before pool.Close: stops watchdogs, waits for clean-ups

	// Fail at startup, not at the first request: an option New refused,
	// Redis unreachable, a script it will not load, no right to PING,
	// SCRIPT LOAD or PUBLISH on the wake channel.
	if err := e.Ping(context.Background()); err != nil {
		log.Fatalf("redis at %s: %v", redisAddr, err)
	}
	// Your database: PostgreSQL through pgx's database/sql driver, imported
	// in driver.go; the carts table is in schema.sql.
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	http.Handle("POST /carts/{id}/order", orderCart(e, db))
	srv := &http.Server{Addr: cmp.Or(os.Getenv("LISTEN_ADDR"), "localhost:8080")}
	go func() {
		<-ctx.Done()
		srv.Shutdown(context.Background())
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

// orderCart takes the engine and the database that main built once.
func orderCart(e *atomicredis.Engine, db *sql.DB) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cartID := r.Context(), r.PathValue("id")
		l, err := e.Lock(ctx, "cart:"+cartID, atomicredis.LockOptions{TTL: 5 * time.Second, Watchdog: true})
		if errors.Is(err, atomicredis.ErrNotAcquired) {
			http.Error(w, "cart busy", http.StatusConflict) // another request holds it (or was queued ahead for Wait, 10 s)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable) // Redis unreachable, or ctx ended before the call queued: not "someone else has it"
			return
		}
		defer l.Unlock(ctx)           // runs even if ctx is done by then
		ctx, cancel := l.Context(ctx) // ends if the lock is lost
		defer cancel()

		// The store refuses a stale holder: the write carries the fence. A lock
		// makes the handler exclusive, not idempotent: a cart ordered already is left alone.
		res, err := db.ExecContext(ctx,
			`UPDATE carts SET status = 'ordered', fence = $1, token = $2
			  WHERE id = $3 AND status <> 'ordered' AND (fence < $1 OR (fence = $1 AND token = $2))`,
			l.Fence(), l.Token(), cartID)
		var n int64
		if err == nil {
			n, err = res.RowsAffected()
		}
		switch {
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		case n == 0: // nothing written: ordered already, or a newer holder wrote first
			http.Error(w, "cart not ordered", http.StatusConflict)
		default:
			w.Write([]byte("ordered\n")) // side effects outside the store (mail, payment) from here on
		}
	}
}
