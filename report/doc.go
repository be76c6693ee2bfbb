// Package report TODO.
package report
