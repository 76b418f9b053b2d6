// Command stages is the course's build-it track: `make stage` lists the
// stages, `make stage NAME=…` opens one and `make grade NAME=…` judges it.
//
// A stage is one key function of the kubelet that a learner writes
// themselves: the PLEG's relist, the mirror pod reconcile, killContainer's
// grace period, computePodActions… Our reference lives in a file of its own
// in mycore/ (the stage file); each function the learner writes carries the
// directive //stage:NAME at the end of its doc comment. Opening a stage
// writes the learner's copy of that file into the state folder with those
// functions' bodies emptied (the stub, made from the reference each time,
// so it cannot drift from it); grading runs the stage's tests — tests that
// hold the reference to upstream's behaviour, file:line at v1.36.3 — with
// the learner's copy in place of the stage file, through `go test
// -overlay`. The reference files are never edited, so every lab keeps
// working while a stage is open, and a learner can run a lab on their own
// code with the same overlay.
//
// Why an overlay rather than build tags or a patch: it replaces exactly
// one file for one build and touches nothing in the checkout, which in the
// VM is mounted read-only; the learner's file lives in $LABS_STATE_DIR.
//
// CI proves, for every stage, that its grader fails on the stub and
// passes on the reference (stages_test.go; `go run ./internal/stages
// --verify all` by hand).
package main
