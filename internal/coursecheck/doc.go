// Package coursecheck holds the tests that keep the course's promises about
// its own shape, which no single lab's test sees: every lab runs as
// `go run labs/NN-name/main.go` as well as `go run ./labs/NN-name`, and the
// packages import only downwards (labs → internal → mycore → mylib; see
// docs/architecture.md).
package coursecheck
