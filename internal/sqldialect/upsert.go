package sqldialect

// Upserts that need no condition, written once for every dialect. They suit
// tables whose one unique key is col: MySQL's ON DUPLICATE KEY fires on any
// unique index.

// OnConflict begins the clause of an INSERT that, when a row with the same
// col exists, updates it with the assignments that follow: ON CONFLICT (col)
// DO UPDATE SET, or on MySQL ON DUPLICATE KEY UPDATE. The assignments read
// the row the INSERT proposed through Excluded.
func (d Dialect) OnConflict(col string) string {
	if d == MySQL {
		return "ON DUPLICATE KEY UPDATE"
	}
	return "ON CONFLICT (" + col + ") DO UPDATE SET"
}

// Excluded names the value of col in the row an INSERT proposed, inside
// OnConflict's assignments: excluded.col, or VALUES(col) on MySQL.
func (d Dialect) Excluded(col string) string {
	if d == MySQL {
		return "VALUES(" + col + ")"
	}
	return "excluded." + col
}

// DoNothing is the clause of an INSERT that leaves a row with the same col
// as it is: ON CONFLICT (col) DO NOTHING, or on MySQL ON DUPLICATE KEY
// UPDATE col = col. The INSERT's affected rows are 1 for a new row and 0
// for a kept one; on MySQL only when the client did not set
// CLIENT_FOUND_ROWS (which counts the kept row as 1): a caller that reads
// them opens its connections without it.
func (d Dialect) DoNothing(col string) string {
	if d == MySQL {
		return "ON DUPLICATE KEY UPDATE " + col + " = " + col
	}
	return "ON CONFLICT (" + col + ") DO NOTHING"
}
