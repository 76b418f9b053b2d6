package main

import (
	"strings"
	"testing"

	"kubelet-labs/internal/testenv"
)

// answer is your prediction (README, section Exercise — two files, one
// name). web.yaml is in the manifests folder; web-copy.yaml, the same pod
// (metadata.name: web) with label app: copy, is moved in; the folder is
// listed again; web-copy.yaml is removed. At each moment, which file's pod
// is the static pod web-lab-node-08: "web.yaml", "web-copy.yaml" or "none"?
// And does the source report the duplicate name ("duplicate pod name"):
// "yes" or "no"?
var answer = struct {
	Lab     prediction // this lab: mycore/podconfig.Files
	Kubelet prediction // the kubelet's own: config.NewSourceFile feeding config.PodConfig
}{
	Lab: prediction{
		AfterMove:   "",
		AfterRelist: "",
		AfterRemove: "",
		Duplicate:   "",
	},
	Kubelet: prediction{
		AfterMove:   "",
		AfterRelist: "",
		AfterRemove: "",
		Duplicate:   "",
	},
}

type prediction struct {
	AfterMove   string // web-copy.yaml was just moved in (the inotify event)
	AfterRelist string // then the folder's next full re-list ran
	AfterRemove string // then web-copy.yaml was removed, before the next re-list
	Duplicate   string // "yes" or "no"
}

// TestExercise runs the scenario on both file sources, the real code, and
// compares what they did with your predictions.
func TestExercise(t *testing.T) {
	testenv.Exercise(t)
	if blank := unanswered(); len(blank) > 0 {
		t.Fatalf("write your predictions into answer at the top of labs/08-static-pod/exercise_test.go: %s", strings.Join(blank, ", "))
	}
	type result struct {
		r   twoFiles
		err error
	}
	kubelet := make(chan result, 1)
	kubeletDir := t.TempDir()
	go func() {
		r, err := runKubeletFileSourceChild(kubeletDir)
		kubelet <- result{r, err}
	}()
	lab, err := runLabFileSource(t.TempDir())
	if err != nil {
		t.Fatalf("this lab's file source: %v", err)
	}
	k := <-kubelet
	if k.err != nil {
		t.Fatal(k.err)
	}
	compare(t, "Lab", "this lab's file source (podconfig.Files)", answer.Lab, lab)
	compare(t, "Kubelet", "the kubelet's file source (NewSourceFile + PodConfig)", answer.Kubelet, k.r)
}

// compare says, moment by moment, where a prediction differs from what the
// source did, and then every op the source sent.
func compare(t *testing.T, field, source string, want prediction, got twoFiles) {
	t.Helper()
	yesNo := map[bool]string{true: "yes", false: "no"}
	wrong := false
	for _, m := range []struct{ what, predicted, happened string }{
		{"AfterMove (the static pod's file right after web-copy.yaml was moved in)", want.AfterMove, got.AfterMove},
		{"AfterRelist (its file after the next re-list)", want.AfterRelist, got.AfterRelist},
		{"AfterRemove (its file right after web-copy.yaml was removed)", want.AfterRemove, got.AfterRemove},
		{"Duplicate (a \"duplicate pod name\" reported)", want.Duplicate, yesNo[got.Duplicate]},
	} {
		if m.predicted != m.happened {
			wrong = true
			t.Errorf("%s, answer.%s.%s: you predicted %q; it was %q", source, field, m.what, m.predicted, m.happened)
		}
	}
	if wrong {
		t.Logf("%s sent, in order: %s", source, strings.Join(got.Ops, "; "))
	}
}

// unanswered lists the predictions left blank or not among the choices.
func unanswered() []string {
	var blank []string
	for _, p := range []struct {
		name string
		p    prediction
	}{{"Lab", answer.Lab}, {"Kubelet", answer.Kubelet}} {
		for _, f := range []struct{ field, value, choices string }{
			{"AfterMove", p.p.AfterMove, "web.yaml web-copy.yaml none"},
			{"AfterRelist", p.p.AfterRelist, "web.yaml web-copy.yaml none"},
			{"AfterRemove", p.p.AfterRemove, "web.yaml web-copy.yaml none"},
			{"Duplicate", p.p.Duplicate, "yes no"},
		} {
			ok := false
			for _, c := range strings.Fields(f.choices) {
				ok = ok || f.value == c
			}
			if !ok {
				blank = append(blank, "answer."+p.name+"."+f.field+" (one of: "+strings.ReplaceAll(f.choices, " ", ", ")+")")
			}
		}
	}
	return blank
}
