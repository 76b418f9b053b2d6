package main

import (
	"strings"
	"testing"
)

const sampleSource = `// Package sample is a stage file for the stub's tests.
package sample

import (
	"errors"
	"fmt"
	v1 "k8s.io/api/core/v1"
	"strings"
	"time"
)

// keep is not part of the stage: its body stays.
func keep() string { return strings.ToUpper("x") }

// one returns a single unnamed result.
//
//stage:demo
func one(p *v1.Pod) time.Duration {
	// a comment the stub must not keep
	return time.Duration(len(p.Name)) * time.Second
}

// two has two unnamed results.
//
//stage:demo
func two(n int) (string, error) {
	if n < 0 {
		return "", errors.New("negative")
	}
	return fmt.Sprint(n), nil
}

// named has named results already.
//
//stage:demo
func named() (n int, err error) { n = 1; return }

// other belongs to another stage.
//
//stage:other
func other() int { return 2 }
`

func samplePackageNames(paths []string) (map[string]string, error) {
	names := map[string]string{"k8s.io/api/core/v1": "v1"}
	for _, p := range paths {
		if names[p] == "" {
			names[p] = p[strings.LastIndex(p, "/")+1:]
		}
	}
	return names, nil
}

func TestStubEmptiesTheMarkedFunctionsOnly(t *testing.T) {
	s := Stage{Name: "demo", File: "mycore/sample/demo.go"}
	got, err := makeStub(s, []byte(sampleSource), samplePackageNames)
	if err != nil {
		t.Fatal(err)
	}
	stub := string(got)
	for _, want := range []string{
		"func one(p *v1.Pod) (_ time.Duration) {",
		"func two(n int) (_ string, _ error) {",
		"func named() (n int, err error) {",
		"func keep() string { return strings.ToUpper(\"x\") }",
		"func other() int { return 2 }",
		"//stage:demo", // the learner still sees which functions are theirs
		"// Your copy of mycore/sample/demo.go for stage demo",
		`v1 "k8s.io/api/core/v1"`, // the signatures use them
		`"time"`,
	} {
		if !strings.Contains(stub, want) {
			t.Errorf("the stub lacks %q:\n%s", want, stub)
		}
	}
	for _, gone := range []string{`"errors"`, `"fmt"`, "a comment the stub must not keep", "negative", "n = 1"} {
		if strings.Contains(stub, gone) {
			t.Errorf("the stub still has %q (only the marked bodies' business):\n%s", gone, stub)
		}
	}
	if n := strings.Count(stub, "\treturn\n"); n != 3 {
		t.Errorf("the stub has %d bare returns, want 3 (one per marked function):\n%s", n, stub)
	}
}

func TestStubOfAFileWithoutTheMarkerIsAnError(t *testing.T) {
	_, err := makeStub(Stage{Name: "absent", File: "x.go"}, []byte(sampleSource), samplePackageNames)
	if err == nil || !strings.Contains(err.Error(), "no function marked //stage:absent") {
		t.Fatalf("err = %v, want one that names the missing marker", err)
	}
}
