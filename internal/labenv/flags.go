package labenv

// KubeconfigUsage is the help of --kubeconfig, in every lab and tool that
// has the flag: one wording, so `--help` says the same thing wherever a
// learner reads it. What it says is Kubeconfig's rule, and RESTConfig's
// handling of a list.
const KubeconfigUsage = "the cluster, as kubectl finds it: an admin kubeconfig (default: $KUBECONFIG — one file or a list, merged as kubectl merges it — else the admin.kubeconfig lab 00 writes in the state folder, .labs/ or $LABS_STATE_DIR)"
