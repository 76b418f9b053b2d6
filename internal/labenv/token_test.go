package labenv

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTokenFlags: --token-file reads a 0600 file, --token still works,
// both at once or a file others may read are refused.
func TestTokenFlags(t *testing.T) {
	const tok = "abcdef.0123456789abcdef"
	dir := t.TempDir()
	private, shared := filepath.Join(dir, "private"), filepath.Join(dir, "shared")
	os.WriteFile(private, []byte(tok+"\n"), 0o600)
	os.WriteFile(shared, []byte(tok+"\n"), 0o644)

	for _, c := range []struct {
		args      []string
		want, err string
	}{
		{nil, "", ""},
		{[]string{"--token-file", private}, tok, ""},
		{[]string{"--token", tok}, tok, ""},
		{[]string{"--token-file", shared}, "", "chmod 600 " + shared},
		{[]string{"--token", tok, "--token-file", private}, "", "both given"},
		{[]string{"--token", "nope"}, "", "is not a bootstrap token"},
	} {
		var token, file string
		fs := flag.NewFlagSet("lab", flag.ContinueOnError)
		RegisterTokenFlags(fs, &token, &file, "bootstrap token")
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		got, err := ResolveToken(token, file)
		if got != c.want || (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%v: %q, %v; want %q, %q", c.args, got, err, c.want, c.err)
		}
	}
}
