// pulumi-resource-kubernetes built from the pinned provider module (go.mod). Upstream's main
// (provider/cmd/pulumi-resource-kubernetes/main.go) embeds schema-embed.json and
// terraform-mapping-embed.json, which its Makefile generates before a release build and git
// ignores, so the module zip lacks them and that package cannot be built from the Go module
// proxy ("pattern schema-embed.json: no matching files found"). This main is upstream's, with
// the two files generated here by gen.go (`go generate`, run by tests/controlplane/build.py).
package main

//go:generate go run gen.go

import (
	_ "embed"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema-embed.json
var pulumiSchema []byte

//go:embed terraform-mapping-embed.json
var terraformMapping []byte

func main() {
	// version.Version is linked in by build.py (-X), as upstream's Makefile does.
	provider.Serve("kubernetes", version.Version, pulumiSchema, terraformMapping)
}
