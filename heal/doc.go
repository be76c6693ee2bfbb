// Package heal TODO.
package heal
