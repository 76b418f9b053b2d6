// Package coursecheck holds the tests that keep the course's promises about
// its own shape, which no single lab's test sees: every lab runs as
// `go run labs/NN-name/main.go` as well as `go run ./labs/NN-name`, the
// packages import only downwards (labs → internal → mycore → mylib, with
// hack/ and scripts/ on top; checked through everything a package or its
// test reaches; see docs/architecture.md), and the libraries (mycore,
// mylib) name no command of the course.
package coursecheck
