package suitekit

// InOppositeOrders runs two transactions at once, one taking a then b, the
// other b then a, each by step: step takes first, closes locked and takes
// second once proceed is closed. proceed is closed once both hold their
// first, so one of them must be a deadlock victim. It returns both steps'
// errors, in the order they ended.
func InOppositeOrders(step func(first, second string, locked chan<- struct{}, proceed <-chan struct{}) error, a, b string) (e1, e2 error) {
	lockedA, lockedB, both := make(chan struct{}), make(chan struct{}), make(chan struct{})
	errs := make(chan error, 2)
	go func() { errs <- step(a, b, lockedA, both) }()
	go func() { errs <- step(b, a, lockedB, both) }()
	<-lockedA
	<-lockedB
	close(both)
	return <-errs, <-errs
}
