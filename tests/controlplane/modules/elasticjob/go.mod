// Pinned Go tools for the real control-plane test tier (tests/controlplane/build.py builds them).
// The ElasticJob controller the project deploys (k8s/base/controller/deployment.yaml runs the image
// torchelastic/kubernetes:0.1.0): pytorch/elastic kubernetes/ at the repository's last release, v0.2.2.
module torchfleet.local/elasticjob

go 1.26.0

tool github.com/pytorch/elastic/kubernetes

// The controller's own source, verbatim from pytorch/elastic v0.2.2 (upstream/SOURCE.md): the Go
// module proxy refuses github.com/pytorch/elastic/kubernetes at every version (403 Forbidden, "This
// module version is not available."), while every module it requires is served. Through a
// directory replace the build still reads upstream's own require lines from upstream/go.mod.
replace github.com/pytorch/elastic/kubernetes => ./upstream

// Upstream's own replace block (pytorch/elastic kubernetes/go.mod), which does not apply from a
// dependency: k8s.io/kubernetes v1.15.10 requires the staging modules at v0.0.0.
replace (
	k8s.io/api => k8s.io/api v0.15.10
	k8s.io/apiextensions-apiserver => k8s.io/apiextensions-apiserver v0.15.10
	k8s.io/apimachinery => k8s.io/apimachinery v0.15.11-beta.0
	k8s.io/apiserver => k8s.io/apiserver v0.15.10
	k8s.io/cli-runtime => k8s.io/cli-runtime v0.15.10
	k8s.io/client-go => k8s.io/client-go v0.15.10
	k8s.io/cloud-provider => k8s.io/cloud-provider v0.15.10
	k8s.io/cluster-bootstrap => k8s.io/cluster-bootstrap v0.15.10
	k8s.io/code-generator => k8s.io/code-generator v0.15.10
	k8s.io/component-base => k8s.io/component-base v0.15.10
	k8s.io/cri-api => k8s.io/cri-api v0.15.11-beta.0
	k8s.io/csi-translation-lib => k8s.io/csi-translation-lib v0.15.10
	k8s.io/kube-aggregator => k8s.io/kube-aggregator v0.15.10
	k8s.io/kube-controller-manager => k8s.io/kube-controller-manager v0.15.10
	k8s.io/kube-proxy => k8s.io/kube-proxy v0.15.10
	k8s.io/kube-scheduler => k8s.io/kube-scheduler v0.15.10
	k8s.io/kubectl => k8s.io/kubectl v0.15.11-beta.0
	k8s.io/kubelet => k8s.io/kubelet v0.15.10
	k8s.io/legacy-cloud-providers => k8s.io/legacy-cloud-providers v0.15.10
	k8s.io/metrics => k8s.io/metrics v0.15.10
	k8s.io/node-api => k8s.io/node-api v0.15.10
	k8s.io/sample-apiserver => k8s.io/sample-apiserver v0.15.10
	k8s.io/sample-cli-plugin => k8s.io/sample-cli-plugin v0.15.10
	k8s.io/sample-controller => k8s.io/sample-controller v0.15.10
)

// k8s.io/kubernetes v1.15.10's go.mod requires vbom.ml/util, a vanity path the proxy no longer
// serves (403 Forbidden); it named github.com/fvbommel/util, served at the same commit.
replace vbom.ml/util => github.com/fvbommel/util v0.0.0-20160121211510-db5cfe13f5cc

// The checksum database has no entry for github.com/kubeflow/common at this pseudo-version (404
// Not Found), so `go mod tidy` here needs GONOSUMDB=github.com/kubeflow/common; its go.sum lines
// are the ones in pytorch/elastic's own kubernetes/go.sum at v0.2.2. Builds read go.sum only.
require github.com/pytorch/elastic/kubernetes v0.0.0-20210218011435-3aa8fb8a1bff // indirect

// Raised above what upstream's graph selects (json-iterator v1.1.6, reflect2 v1.0.1), nothing else:
// reflect2 before v1.0.2 calls the runtime's map iterator with its pre-Go 1.18 signature, so
// json-iterator crashes (SIGSEGV in reflect.mapiternext) on the first map it encodes when built
// with Go 1.18 or later (reproduced with Go 1.26.8; modern-go/reflect2#26; json-iterator v1.1.12 requires
// v1.0.2). apimachinery v0.15 decodes every object with json-iterator and encodes with it in its
// YAML and pretty serializers. MVS also lifts github.com/google/gofuzz to v1.0.0, which
// json-iterator v1.1.12 requires. golang.org/x/sys stays at upstream's 2019 version: it builds
// for linux with Go 1.26.
require (
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/modern-go/reflect2 v1.0.2 // indirect
)

require (
	cloud.google.com/go v0.34.0 // indirect
	github.com/PuerkitoBio/purell v1.1.0 // indirect
	github.com/PuerkitoBio/urlesc v0.0.0-20170810143723-de5bf2ad4578 // indirect
	github.com/beorn7/perks v1.0.0 // indirect
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/docker/distribution v2.7.1+incompatible // indirect
	github.com/emicklei/go-restful v2.9.3+incompatible // indirect
	github.com/evanphx/json-patch v4.5.0+incompatible // indirect
	github.com/go-logr/logr v0.1.0 // indirect
	github.com/go-logr/zapr v0.1.0 // indirect
	github.com/go-openapi/jsonpointer v0.19.0 // indirect
	github.com/go-openapi/jsonreference v0.19.0 // indirect
	github.com/go-openapi/spec v0.19.0 // indirect
	github.com/go-openapi/swag v0.17.2 // indirect
	github.com/gogo/protobuf v1.2.1 // indirect
	github.com/golang/groupcache v0.0.0-20190129154638-5b532d6fd5ef // indirect
	github.com/golang/protobuf v1.3.2 // indirect
	github.com/google/go-cmp v0.3.0 // indirect
	github.com/google/gofuzz v1.0.0 // indirect
	github.com/google/uuid v1.0.0 // indirect
	github.com/googleapis/gnostic v0.3.1 // indirect
	github.com/hashicorp/golang-lru v0.5.1 // indirect
	github.com/imdario/mergo v0.3.7 // indirect
	github.com/konsorten/go-windows-terminal-sequences v1.0.1 // indirect
	github.com/kubeflow/common v0.0.0-20200327002023-0b3a4c3fca85 // indirect
	github.com/kubernetes-sigs/kube-batch v0.4.2 // indirect
	github.com/mailru/easyjson v0.0.0-20180823135443-60711f1a8329 // indirect
	github.com/matttproud/golang_protobuf_extensions v1.0.1 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/opencontainers/go-digest v1.0.0-rc1 // indirect
	github.com/pkg/errors v0.8.1 // indirect
	github.com/prometheus/client_golang v1.0.0 // indirect
	github.com/prometheus/client_model v0.0.0-20190129233127-fd36f4220a90 // indirect
	github.com/prometheus/common v0.4.1 // indirect
	github.com/prometheus/procfs v0.0.2 // indirect
	github.com/sirupsen/logrus v1.4.1 // indirect
	github.com/spf13/pflag v1.0.3 // indirect
	go.uber.org/atomic v1.3.2 // indirect
	go.uber.org/multierr v1.1.0 // indirect
	go.uber.org/zap v1.9.1 // indirect
	golang.org/x/crypto v0.0.0-20190325154230-a5d413f7728c // indirect
	golang.org/x/net v0.0.0-20190812203447-cdfb69ac37fc // indirect
	golang.org/x/oauth2 v0.0.0-20190402181905-9f3314589c9a // indirect
	golang.org/x/sys v0.0.0-20190312061237-fead79001313 // indirect
	golang.org/x/text v0.3.1-0.20181227161524-e6919f6577db // indirect
	golang.org/x/time v0.0.0-20190308202827-9d24e82272b4 // indirect
	golang.org/x/xerrors v0.0.0-20190717185122-a985d3407aa7 // indirect
	gomodules.xyz/jsonpatch/v2 v2.0.1 // indirect
	google.golang.org/appengine v1.5.0 // indirect
	gopkg.in/fsnotify.v1 v1.4.7 // indirect
	gopkg.in/inf.v0 v0.9.1 // indirect
	gopkg.in/square/go-jose.v2 v2.3.0 // indirect
	gopkg.in/yaml.v2 v2.2.8 // indirect
	k8s.io/api v0.15.10 // indirect
	k8s.io/apiextensions-apiserver v0.0.0 // indirect
	k8s.io/apimachinery v0.15.10 // indirect
	k8s.io/apiserver v0.15.10 // indirect
	k8s.io/client-go v0.15.10 // indirect
	k8s.io/code-generator v0.15.10 // indirect
	k8s.io/component-base v0.15.10 // indirect
	k8s.io/klog v0.3.3 // indirect
	k8s.io/kube-openapi v0.0.0-20190228160746-b3a7cee44a30 // indirect
	k8s.io/kubernetes v1.15.10 // indirect
	k8s.io/utils v0.0.0-20190506122338-8fab8cb257d5 // indirect
	sigs.k8s.io/controller-runtime v0.3.0 // indirect
	sigs.k8s.io/yaml v1.1.0 // indirect
)
