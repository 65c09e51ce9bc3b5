//go:build !stubstore

package main

// PostgreSQL's driver for database/sql, registered as "pgx". CI builds
// with -tags stubstore instead: store_stub.go registers a stub under that
// name.
import _ "github.com/jackc/pgx/v5/stdlib"
