//go:build ignore

// Writes schema-embed.json and terraform-mapping-embed.json beside main.go from the pinned
// provider module's cmd/pulumi-resource-kubernetes/schema.json and terraform-mapping.json, as
// upstream's generate.go there does: the schema compacted with its "version" set to $VERSION,
// the mapping compacted.
package main

import (
	"bytes"
	"encoding/json"
	"log"
	"os"
	"os/exec"
	"path/filepath"
)

const providerModule = "github.com/pulumi/pulumi-kubernetes/provider/v4"

func main() {
	version := os.Getenv("VERSION")
	if version == "" {
		log.Fatal("VERSION is not set (the provider release this build stands for, e.g. 4.25.0)")
	}
	// `go mod download`, not `go list -m`: on a new machine the module is not in the cache yet
	// (this runs before the build fetches it), and `go list -m` then reports no folder.
	out, err := exec.Command("go", "mod", "download", "-json", providerModule).Output()
	if err != nil {
		log.Fatalf("go mod download %s: %v", providerModule, err)
	}
	var module struct{ Dir string }
	if err := json.Unmarshal(out, &module); err != nil || module.Dir == "" {
		log.Fatalf("go mod download %s gave no folder: %s", providerModule, out)
	}
	source := filepath.Join(module.Dir, "cmd", "pulumi-resource-kubernetes")

	var schema map[string]any
	read(filepath.Join(source, "schema.json"), &schema)
	schema["version"] = version
	write("schema-embed.json", schema)

	var mapping any
	read(filepath.Join(source, "terraform-mapping.json"), &mapping)
	write("terraform-mapping-embed.json", mapping)
}

func read(path string, into any) {
	data, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.UseNumber() // keep numbers as written
	if err := decoder.Decode(into); err != nil {
		log.Fatalf("%s: %v", path, err)
	}
}

func write(path string, value any) {
	data, err := json.Marshal(value)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		log.Fatal(err)
	}
}
