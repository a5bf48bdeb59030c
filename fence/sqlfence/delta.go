package sqlfence

// A Delta is a relative change of a numeric column, made with [Add].
type Delta struct{ by any }

// Add is a value for [Values] that changes a column by delta instead of
// setting it: Values{"balance": Add(-100)} is "balance = balance + $1" with
// -100 as the parameter. The column name is checked like every other; delta
// is never spliced into the statement. A NULL column stays NULL, as SQL
// arithmetic has it. Add(nil) is refused with fence.ErrInvalid.
//
// A relative update needs no read before it, so the lost update of a
// read-modify-write cannot happen to it: a debit applied by a stale holder
// before the fresh holder's write is not erased by it. When the new value
// depends on a decision made on the old one (is the balance enough?), read
// it with [Guard.Read] first.
func Add(delta any) Delta { return Delta{by: delta} }
