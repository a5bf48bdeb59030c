//go:build linux && race

package outbox_test

// raceDetector reports whether the test binary was built with -race.
const raceDetector = true
