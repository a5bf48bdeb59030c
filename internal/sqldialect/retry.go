package sqldialect

import (
	"errors"
	"fmt"
	"reflect"
)

// ErrRetry marks a database error after which the caller's transaction must
// be rolled back and run again from its start: a deadlock, a lock wait
// timeout, a serialization failure. Nothing of the failed statement was
// applied; on MySQL a deadlock has rolled the whole transaction back already,
// and a lock wait timeout the statement (the transaction's earlier statements
// are still there, uncommitted: roll back, do not commit them). fence/sqlfence,
// state and dedup/sqlinbox re-export it.
var ErrRetry = errors.New("sql: transaction conflict (deadlock, lock wait timeout or serialization failure): roll back and retry the whole transaction")

// MySQL's error numbers that ask for a retry of the transaction.
const (
	mysqlLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT
	mysqlDeadlock        = 1213 // ER_LOCK_DEADLOCK
)

// PostgreSQL's SQLSTATEs that ask for one (SQLite's busy errors are retried by
// its busy handler).
var postgresRetry = map[string]bool{
	"40001": true, // serialization_failure
	"40P01": true, // deadlock_detected
	"55P03": true, // lock_not_available (lock_timeout)
}

// Retryable returns err wrapped with ErrRetry, when it is one of the errors
// ErrRetry describes, or err as it is: nil stays nil. The driver's error stays
// in the chain for errors.As.
//
// The core packages import no driver, so the errors are recognised by shape:
// go-sql-driver's *mysql.MySQLError by its Number field, pgx's *pgconn.PgError
// and lib/pq's by their SQLState method.
func Retryable(err error) error {
	if err == nil || errors.Is(err, ErrRetry) || !retryable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrRetry, err)
}

func retryable(err error) bool {
	return inChain(err, func(err error) bool {
		if s, ok := err.(interface{ SQLState() string }); ok && postgresRetry[s.SQLState()] {
			return true
		}
		n, ok := mysqlNumber(err)
		return ok && (n == mysqlDeadlock || n == mysqlLockWaitTimeout)
	})
}

// inChain reports whether match holds for err or an error it wraps, joined
// errors included.
func inChain(err error, match func(error) bool) bool {
	for err != nil {
		if match(err) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if inChain(e, match) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

// mysqlNumber reads the Number of a *mysql.MySQLError.
func mysqlNumber(err error) (uint64, bool) {
	v := reflect.ValueOf(err)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct || v.Elem().Type().Name() != "MySQLError" {
		return 0, false
	}
	f := v.Elem().FieldByName("Number")
	if !f.IsValid() || !f.CanUint() {
		return 0, false
	}
	return f.Uint(), true
}

// MySQL's error numbers that say the server will not prepare a statement.
const (
	mysqlUnsupportedPS    = 1295 // ER_UNSUPPORTED_PS: not in the prepared statement protocol
	mysqlMaxPreparedStmts = 1461 // ER_MAX_PREPARED_STMT_COUNT_REACHED
)

// Unprepared reports whether err says that the server will not prepare a
// statement (MySQL: max_prepared_stmt_count reached, or a statement the
// prepared protocol does not take), so that nothing of it ran and it may run
// unprepared instead: sqlconn.Prepared's test.
func Unprepared(err error) bool {
	return inChain(err, func(err error) bool {
		n, ok := mysqlNumber(err)
		return ok && (n == mysqlMaxPreparedStmts || n == mysqlUnsupportedPS)
	})
}
