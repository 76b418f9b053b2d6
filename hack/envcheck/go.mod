module kubelet-labs/hack/envcheck

go 1.26.0

require (
	github.com/lima-vm/lima v1.2.1
	github.com/opencontainers/go-digest v1.0.0
	github.com/sirupsen/logrus v1.9.4-0.20230606125235-dd1b4c2e81af
	go.yaml.in/yaml/v3 v3.0.4
	golang.org/x/mod v0.25.0
	sigs.k8s.io/kind v0.32.0
)

require (
	github.com/a8m/envsubst v1.4.2 // indirect
	github.com/alecthomas/participle/v2 v2.1.4 // indirect
	github.com/bmatcuk/doublestar/v4 v4.7.1 // indirect
	github.com/coreos/go-semver v0.3.1 // indirect
	github.com/dimchansky/utfbom v1.1.1 // indirect
	github.com/docker/go-units v0.5.0 // indirect
	github.com/elliotchance/orderedmap v1.8.0 // indirect
	github.com/fatih/color v1.18.0 // indirect
	github.com/goccy/go-json v0.10.5 // indirect
	github.com/goccy/go-yaml v1.18.0 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/google/yamlfmt v0.17.2 // indirect
	github.com/jinzhu/copier v0.4.0 // indirect
	github.com/magiconair/properties v1.8.10 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/mikefarah/yq/v4 v4.45.1 // indirect
	github.com/mitchellh/mapstructure v1.5.0 // indirect
	github.com/pbnjay/memory v0.0.0-20210728143218-7b4eea64cf58 // indirect
	github.com/pelletier/go-toml/v2 v2.2.3 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/sabhiram/go-gitignore v0.0.0-20210923224102-525f6e181f06 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	golang.org/x/net v0.41.0 // indirect
	golang.org/x/sys v0.34.0 // indirect
	golang.org/x/text v0.27.0 // indirect
	gopkg.in/op/go-logging.v1 v1.0.0-20160211212156-b2cb9fa56473 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
