//go:build race

package sanitize

// raceEnabled shrinks the 10 MB adversarial inputs under the race detector,
// which slows the single pass about 20x.
const raceEnabled = true
