package labenv

import (
	"errors"
	"flag"

	"kubelet-labs/mycore/bootstrap"
)

// RegisterTokenFlags adds --token-file and --token to fs, for a lab that
// joins (or checks) with a bootstrap token; what says what the token is
// for. --token-file is the one to use: a token on the command line is
// visible to every user of the machine (ps, /proc/PID/cmdline) and stays
// in shell history; the file must be 0600 (bootstrap.ReadTokenFile).
// --token keeps working, for a quick try.
func RegisterTokenFlags(fs *flag.FlagSet, token, file *string, what string) {
	fs.StringVar(file, "token-file", *file, what+": read ID.SECRET from this file, which must be 0600 (lab 03 writes one: bootstrap/token in the state folder)")
	fs.StringVar(token, "token", *token, what+": ID.SECRET on the command line (every user of this machine can see it in ps; prefer --token-file)")
}

// ResolveToken is the token the two flags name, "ID.SECRET", or "" when
// neither was given. It fails on both at once, on a file group or others
// may read, and on anything that is not a bootstrap token.
func ResolveToken(token, file string) (string, error) {
	switch {
	case token != "" && file != "":
		return "", errors.New("--token and --token-file both given: use one (--token-file keeps the token off the command line)")
	case file != "":
		tok, err := bootstrap.ReadTokenFile(file)
		if err != nil {
			return "", err
		}
		return tok.String(), nil
	case token != "":
		tok, err := bootstrap.ParseToken(token)
		if err != nil {
			return "", err
		}
		return tok.String(), nil
	}
	return "", nil
}
