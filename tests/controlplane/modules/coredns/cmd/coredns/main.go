// CoreDNS v1.15.0 with only the plugins the real node's Corefile and a kubeadm cluster's default
// Corefile use (tests/controlplane/node.py), compiled in the way CoreDNS documents for a chosen
// plugin set: a main that imports coremain and each plugin, and the directives in plugin.cfg's
// order (https://coredns.io/2017/07/25/compile-time-enabling-or-disabling-plugins/, and
// core/dnsserver/zdirectives.go of v1.15.0, whose order the list below keeps). The release's own
// main (github.com/coredns/coredns) compiles every plugin, the cloud DNS providers' SDKs and
// Datadog's tracer among them: about ten minutes of a cold build on CI's two cores for nothing
// the node resolves.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func init() {
	// plugin.cfg's order, restricted to the plugins imported above.
	dnsserver.Directives = []string{
		"reload", "bind", "ready", "health", "errors", "log", "loadbalance", "cache", "kubernetes", "loop", "forward",
	}
}

func main() {
	coremain.Run()
}
