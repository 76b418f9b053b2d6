// Command selfcheck tells a learner whether they did a lab: it looks at what
// their run left on the cluster, in the state folder and in the runtime (the
// Lease renewing, the CSR approved and issued, the mirror pod there, exit
// code 137 after the grace period…) and says, per thing, done or not yet,
// with a hint. It does not re-run the lab or its test.
//
//	make check LAB=07               # go run ./internal/selfcheck --lab 07
//	make check LAB=07 EXERCISE=1    # … --exercise: also run the lab's exercise test
//
// Each lab's checks are in labNN.go, one file per lab. The exercise test is
// labs/NN-name/exercise_test.go (TestExercise, skipped unless LABS_EXERCISE=1);
// its reference solution is solutions/NN-name.patch, which CI applies and
// tests on every run (selfcheck_test.go), so no solution rots.
package main
