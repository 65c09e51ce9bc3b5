//go:build stubstore

// The quick start's database for CI (.ci/consumer builds this program with
// -tags stubstore and runs it against a real Redis): a database/sql driver
// registered as "pgx", the name main.go opens, in place of pgx's
// (driver.go), that keeps carts in memory and runs the quick start's one
// statement, the (fence, token) rule, for real. A cart's row is made at its
// first order, as new (schema.sql's defaults). Cart 7 starts as written by
// a holder with a fence no lock of this run can reach, so that an order of
// cart 7 is refused by the rule: the quick start must see that in
// RowsAffected.
package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log"
	"math"
	"strings"
	"sync"
)

// update is the quick start's statement, its white space collapsed.
const update = `UPDATE carts SET status = 'ordered', fence = $1, token = $2 ` +
	`WHERE id = $3 AND status <> 'ordered' AND (fence < $1 OR (fence = $1 AND token = $2))`

type cart struct {
	status string
	fence  int64
	token  string
}

type store struct {
	mu    sync.Mutex
	carts map[string]*cart
}

func init() {
	sql.Register("pgx", &store{carts: map[string]*cart{
		"7": {status: "new", fence: math.MaxInt64, token: "a newer holder"},
	}})
}

func (s *store) Open(string) (driver.Conn, error) { return conn{s}, nil }

type conn struct{ s *store }

func (conn) Prepare(string) (driver.Stmt, error) {
	return nil, errors.New("store stub: no prepared statements")
}
func (conn) Close() error              { return nil }
func (conn) Begin() (driver.Tx, error) { return nil, errors.New("store stub: no transactions") }

func (c conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if q := strings.Join(strings.Fields(query), " "); q != update {
		return nil, fmt.Errorf("store stub: not the quick start's statement: %s", q)
	}
	if len(args) != 3 {
		return nil, fmt.Errorf("store stub: %d arguments, want 3", len(args))
	}
	fence, ok1 := args[0].Value.(int64)
	token, ok2 := args[1].Value.(string)
	id, ok3 := args[2].Value.(string)
	if !ok1 || !ok2 || !ok3 {
		return nil, fmt.Errorf("store stub: arguments %v, want fence int64, token and id strings", args)
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	row := c.s.carts[id]
	if row == nil {
		row = &cart{status: "new"}
		c.s.carts[id] = row
	}
	if row.status != "ordered" && (row.fence < fence || (row.fence == fence && row.token == token)) {
		*row = cart{status: "ordered", fence: fence, token: token}
		log.Printf("store: cart %s ordered by fence %d", id, fence)
		return driver.RowsAffected(1), nil
	}
	log.Printf("store: cart %s not written (status %s, fence %d; this holder's fence %d)", id, row.status, row.fence, fence)
	return driver.RowsAffected(0), nil
}
