package sqlfence_test

import (
	"context"
	"database/sql/driver"
	"errors"
)

// fakeConnector is a driver no real server can stand in for: one whose
// dialect cannot be told from its type name. It is never connected.
type fakeConnector struct{}

func (fakeConnector) Connect(context.Context) (driver.Conn, error) {
	return nil, errors.New("fake: not a database")
}
func (fakeConnector) Driver() driver.Driver { return fakeDriver{} }

type fakeDriver struct{}

func (fakeDriver) Open(string) (driver.Conn, error) { return nil, errors.New("fake: not a database") }
