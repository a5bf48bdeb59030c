// Package options applies a constructor's functional options.
package options

// Apply calls each of opts on c, in order, skipping nil ones (a caller may
// build its options conditionally and pass a nil).
func Apply[O ~func(*C), C any](c *C, opts []O) {
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
}
