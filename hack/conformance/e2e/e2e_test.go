//go:build conformance

// Package e2e is upstream's e2e test binary: test/e2e's suite set-up
// (k8s.io/kubernetes/test/e2e: the SynchronizedBeforeSuite that waits for
// schedulable nodes, the progress reporter) with the spec packages of a
// suite. Built by hack/conformance in two sizes: -tags conformance holds
// the default suite's packages (the node's; the CI slice builds it in a
// few minutes), -tags conformance,certified every spec package
// test/e2e/e2e_test.go loads (suite_test.go), for the certified and node
// suites (about 20 minutes cold on 2 cores). Never run by `go test ./...`
// (the build tag keeps it out).
package e2e

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"k8s.io/component-base/version"
	conformancetestdata "k8s.io/kubernetes/test/conformance/testdata"
	upstreame2e "k8s.io/kubernetes/test/e2e"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"
	"k8s.io/kubernetes/test/e2e/framework/testfiles"
	"k8s.io/kubernetes/test/e2e/invariants/logcheck"
	e2etestingmanifests "k8s.io/kubernetes/test/e2e/testing-manifests"
	testfixtures "k8s.io/kubernetes/test/fixtures"

	// test/e2e/e2e_test.go:44-45 at v1.36.3: define and freeze the
	// feature constants before any spec package uses them
	_ "k8s.io/kubernetes/test/e2e/feature"

	// the spec packages of the default suite (sig-node's and the common
	// node, network and storage specs); suite_test.go adds every other
	// spec package of test/e2e/e2e_test.go:47-68 under the build tag
	// "certified"
	_ "k8s.io/kubernetes/test/e2e/common/network"
	_ "k8s.io/kubernetes/test/e2e/common/node"
	_ "k8s.io/kubernetes/test/e2e/common/storage"
	_ "k8s.io/kubernetes/test/e2e/node"

	// test/e2e/e2e_test.go:70-74: flags and reporters of the framework
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/metrics/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
	_ "k8s.io/kubernetes/test/utils/format"
)

// TestMain is test/e2e/e2e_test.go:86-141 at v1.36.3 without
// --list-conformance-tests: register the framework's flags, parse them,
// add the embedded test files, then run.
func TestMain(m *testing.M) {
	versionFlag := flag.CommandLine.Bool("version", false, "Displays version information.")
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	logcheck.RegisterFlags(flag.CommandLine)
	flag.Parse()
	if *versionFlag {
		fmt.Printf("%s\n", version.Get())
		os.Exit(0)
	}
	if flag.CommandLine.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unknown additional command line arguments: %s\n", flag.CommandLine.Args())
		os.Exit(1)
	}
	testfiles.AddFileSource(e2etestingmanifests.GetE2ETestingManifestsFS())
	testfiles.AddFileSource(testfixtures.GetTestFixturesFS())
	testfiles.AddFileSource(conformancetestdata.GetConformanceTestdataFS())
	framework.AfterReadingAllFlags(&framework.TestContext)
	os.Exit(m.Run())
}

// TestE2E runs the suite as test/e2e/e2e_test.go's TestE2E does.
func TestE2E(t *testing.T) { upstreame2e.RunE2ETests(t) }
