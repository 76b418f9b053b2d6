// Package crictlview prints what a CRI runtime says about itself and what
// it runs, in the words of `crictl version`, `crictl info`, `crictl pods`
// and `crictl ps -a`: lab 11's first look at containerd.
package crictlview

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"kubelet-labs/mycore/cri"
)

// Print asks the runtime behind c for its version and conditions (CRI
// Version and Status, what the kubelet asks before it runs a pod), then
// lists its pod sandboxes and containers as tables.
func Print(ctx context.Context, c *cri.Client, out io.Writer) error {
	info, err := c.Info(ctx)
	if err != nil {
		return err
	}
	var conds []string
	for _, cond := range info.Conditions {
		s := fmt.Sprintf("%s=%t", cond.Type, cond.Status)
		if !cond.Status && cond.Reason != "" {
			s += fmt.Sprintf(" (%s: %s)", cond.Reason, cond.Message)
		}
		conds = append(conds, s)
	}
	fmt.Fprintf(out, "endpoint:    %s\nruntime:     %s %s\nCRI API:     %s\nconditions:  %s\n",
		c.Endpoint, info.RuntimeName, info.RuntimeVersion, info.APIVersion, strings.Join(conds, " "))

	pods, err := c.Pods(ctx, nil)
	if err != nil {
		return err
	}
	var b strings.Builder // one Write per table: the lines stay together
	fmt.Fprintf(&b, "\npods (%d):\n", len(pods))
	if len(pods) > 0 {
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  POD ID\tNAMESPACE/NAME\tSTATE\tAGE")
		for _, p := range pods {
			fmt.Fprintf(tw, "  %.13s\t%s/%s\t%s\t%s\n", p.Id, p.Metadata.GetNamespace(), p.Metadata.GetName(),
				strings.TrimPrefix(p.State.String(), "SANDBOX_"), age(p.CreatedAt))
		}
		tw.Flush()
	}

	ctrs, err := c.Containers(ctx, "")
	if err != nil {
		return err
	}
	fmt.Fprintf(&b, "containers (%d):\n", len(ctrs))
	if len(ctrs) > 0 {
		names := imageNames(ctx, c)
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  CONTAINER ID\tNAME\tIMAGE\tSTATE\tPOD ID")
		for _, ct := range ctrs {
			img := ct.Image.GetImage()
			if n, ok := names[img]; ok {
				img = n
			}
			fmt.Fprintf(tw, "  %.13s\t%s\t%s\t%s\t%.13s\n", ct.Id, ct.Metadata.GetName(), img,
				strings.TrimPrefix(ct.State.String(), "CONTAINER_"), ct.PodSandboxId)
		}
		tw.Flush()
	}
	_, err = io.WriteString(out, b.String())
	return err
}

// imageNames maps image IDs to a tag: containerd reports a container's
// image by ID (the kubelet's ImageRef); people read tags.
func imageNames(ctx context.Context, c *cri.Client) map[string]string {
	m := map[string]string{}
	imgs, err := c.ImageList(ctx)
	if err != nil {
		return m
	}
	for _, img := range imgs {
		if len(img.RepoTags) > 0 {
			m[img.Id] = img.RepoTags[0]
		}
	}
	return m
}

func age(createdAt int64) string {
	if createdAt == 0 {
		return "?"
	}
	return time.Since(time.Unix(0, createdAt)).Round(time.Second).String()
}
