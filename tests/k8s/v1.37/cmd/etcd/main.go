// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3 at the version
// k8s.io/kubernetes v1.37.2 is tested with.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
